// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {ECDSA} from "@openzeppelin/contracts/utils/cryptography/ECDSA.sol";

/// @title DevnetSmartWallet
/// @notice A minimal smart-contract wallet for local chains: one owner key,
///         and ERC-1271 signature validation, which is all a token's
///         `transferWithAuthorization` asks of a contract payer. It stands in
///         for the smart wallets (Coinbase Smart Wallet, Safe, ERC-4337
///         accounts) that pay x402 resources on mainnet.
/// @dev The owner signs the EIP-712 digest itself. Production wallets often
///      wrap the digest in a wallet-specific "replay-safe" hash first; a client
///      signer for such a wallet does the same wrapping, so the flow through
///      the facilitator is identical.
contract DevnetSmartWallet {
    /// @notice ERC-1271's magic value: `isValidSignature.selector`.
    bytes4 internal constant ERC1271_MAGIC_VALUE = 0x1626ba7e;

    address public immutable owner;

    error NotOwner();

    constructor(address owner_) {
        owner = owner_;
    }

    /// @notice ERC-1271: valid when `signature` is the owner's ECDSA signature of `hash`.
    function isValidSignature(bytes32 hash, bytes calldata signature) external view returns (bytes4) {
        (address signer, ECDSA.RecoverError error_,) = ECDSA.tryRecover(hash, signature);
        return error_ == ECDSA.RecoverError.NoError && signer == owner ? ERC1271_MAGIC_VALUE : bytes4(0xffffffff);
    }

    /// @notice Lets the owner move the wallet's funds (tokens, ETH) anywhere.
    function execute(address to, uint256 value, bytes calldata data) external returns (bytes memory) {
        if (msg.sender != owner) revert NotOwner();
        (bool ok, bytes memory result) = to.call{value: value}(data);
        if (!ok) {
            assembly {
                revert(add(result, 32), mload(result))
            }
        }
        return result;
    }

    receive() external payable {}
}
