// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

/// @title DevnetERC1967Proxy
/// @notice A payer wallet for the security tests, never deployed by the
///         devnet itself: placed with `anvil_setCode`, with its implementation
///         written to the ERC-1967 slot with `anvil_setStorageAt`. Smart
///         wallets (Coinbase Smart Wallet among them) are such proxies: every
///         account shares this code, and what it runs is the implementation
///         the slot names, which is what the service judges a wallet by.
contract DevnetERC1967Proxy {
    /// @dev keccak256("eip1967.proxy.implementation") - 1
    bytes32 internal constant IMPLEMENTATION_SLOT =
        0x360894a13ba1a3210667c828492db98dca3e2076cc3735a920a3ca505d382bbc;

    fallback() external payable {
        address implementation;
        assembly {
            implementation := sload(IMPLEMENTATION_SLOT)
        }
        (bool ok, bytes memory result) = implementation.delegatecall(msg.data);
        assembly {
            switch ok
            case 0 { revert(add(result, 32), mload(result)) }
            default { return(add(result, 32), mload(result)) }
        }
    }

    receive() external payable {}
}
