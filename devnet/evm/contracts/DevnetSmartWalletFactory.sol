// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {DevnetSmartWallet} from "./DevnetSmartWallet.sol";

/// @title DevnetSmartWalletFactory
/// @notice Deploys DevnetSmartWallets at addresses known before deployment
///         (CREATE2 from owner and salt), which is what lets a wallet that
///         does not exist yet sign an ERC-6492 payment: its signature carries
///         this factory and the `createAccount` call that deploys it, and the
///         facilitator makes that call at settle.
/// @dev Placed with `anvil_setCode`, so it holds no state and needs no
///      constructor: the wallet's creation code is compiled into it.
contract DevnetSmartWalletFactory {
    event AccountCreated(address indexed account, address indexed owner, uint256 salt);

    /// @notice Deploys the wallet of (`owner`, `salt`), or returns it when it exists.
    function createAccount(address owner, uint256 salt) external returns (DevnetSmartWallet wallet) {
        address predicted = getAddress(owner, salt);
        if (predicted.code.length > 0) return DevnetSmartWallet(payable(predicted));
        wallet = new DevnetSmartWallet{salt: bytes32(salt)}(owner);
        emit AccountCreated(address(wallet), owner, salt);
    }

    /// @notice Where the wallet of (`owner`, `salt`) lives, deployed or not.
    function getAddress(address owner, uint256 salt) public view returns (address) {
        bytes32 initCodeHash =
            keccak256(abi.encodePacked(type(DevnetSmartWallet).creationCode, abi.encode(owner)));
        return address(
            uint160(uint256(keccak256(abi.encodePacked(bytes1(0xff), address(this), bytes32(salt), initCodeHash))))
        );
    }
}
