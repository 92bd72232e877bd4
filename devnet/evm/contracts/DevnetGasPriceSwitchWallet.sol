// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

/// @title DevnetGasPriceSwitchWallet
/// @notice A hostile payer for the security tests, never deployed by the
///         devnet itself: placed at an address with `anvil_setCode` (an
///         ERC-1271 wallet), or named by an EOA's EIP-7702 delegation.
///         Its ERC-1271 check first burns gas, then answers "valid" only when
///         `tx.gasprice` is 0, which is true of a simulation run without a fee
///         and never of a transaction on-chain. A facilitator that simulates
///         without the fee it will pay sees a good payment and broadcasts one
///         that reverts at its own cost.
/// @dev The "signature" is the number of burn rounds, as one 32-byte word: the
///      payer picks how much of the facilitator's gas each check burns. A
///      second, non-zero word makes the check valid at any gas price: a wallet
///      that pays, but only after burning the facilitator's gas.
contract DevnetGasPriceSwitchWallet {
    bytes4 internal constant ERC1271_MAGIC_VALUE = 0x1626ba7e;

    function isValidSignature(bytes32, bytes calldata signature) external view returns (bytes4) {
        uint256 rounds = signature.length >= 32 ? uint256(bytes32(signature[0:32])) : 0;
        bytes32 acc;
        for (uint256 i; i < rounds; ++i) acc = keccak256(abi.encode(acc, i));
        // Reading `acc` keeps the loop from being optimised away.
        if (acc == bytes32(uint256(1))) return bytes4(0);
        bool always = signature.length >= 64 && uint256(bytes32(signature[32:64])) != 0;
        return always || tx.gasprice == 0 ? ERC1271_MAGIC_VALUE : bytes4(0xffffffff);
    }

    receive() external payable {}
}
