// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {DevnetPermit2} from "./DevnetPermit2.sol";
import {DevnetPermit2612Attempt} from "./DevnetPermit2612Attempt.sol";

/// @title DevnetPermit2DepositCollector
/// @notice The batch-settlement deposit collector for any ERC-20 through
///         Permit2, on local chains, with the same ABI and behaviour as
///         x402-foundation's Permit2DepositCollector: the payer signs a Permit2
///         witness transfer whose witness is the channel id, so the signature
///         can fund that channel and no other; tokens go straight from the payer
///         to the escrow. An optional EIP-2612 permit in the data approves
///         Permit2 first (gasless onboarding); if it fails, the failure is
///         logged and the transfer still runs (the approval may exist).
/// @dev Placed with `anvil_setCode`: Permit2 and the escrow are constants.
contract DevnetPermit2DepositCollector is DevnetPermit2612Attempt {
    /// @notice The canonical Permit2.
    DevnetPermit2 public constant PERMIT2 = DevnetPermit2(0x000000000022D473030F116dDEE9F6B43aC78BA3);
    /// @notice The batch-settlement escrow this collector serves.
    address public constant x402BatchSettlement = 0x4020074e9dF2ce1deE5A9C1b5c3f541D02a10003;

    /// @notice Completes Permit2's witness type; referenced structs in alphabetical order.
    string public constant DEPOSIT_WITNESS_TYPE_STRING =
        "DepositWitness witness)DepositWitness(bytes32 channelId)TokenPermissions(address token,uint256 amount)";
    bytes32 public constant DEPOSIT_WITNESS_TYPEHASH = keccak256("DepositWitness(bytes32 channelId)");


    error InvalidPermit2Address();
    error OnlyX402BatchSettlement();
    error Permit2612AmountMismatch();

    /// @param data `abi.encode(nonce, deadline, permit2Signature, eip2612PermitData)`; the
    ///        last may be empty, else `abi.encode(value, deadline, v, r, s)`.
    function collect(address payer, address token, uint256 amount, bytes32 channelId, bytes calldata data) external {
        if (msg.sender != x402BatchSettlement) revert OnlyX402BatchSettlement();
        (uint256 nonce, uint256 deadline, bytes memory signature, bytes memory permit2612) =
            abi.decode(data, (uint256, uint256, bytes, bytes));
        if (permit2612.length > 0) _tryPermit(payer, token, amount, permit2612);
        PERMIT2.permitWitnessTransferFrom(
            DevnetPermit2.PermitTransferFrom({
                permitted: DevnetPermit2.TokenPermissions({token: token, amount: amount}),
                nonce: nonce,
                deadline: deadline
            }),
            DevnetPermit2.SignatureTransferDetails({to: x402BatchSettlement, requestedAmount: amount}),
            payer,
            keccak256(abi.encode(DEPOSIT_WITNESS_TYPEHASH, channelId)),
            DEPOSIT_WITNESS_TYPE_STRING,
            signature
        );
    }

    function _tryPermit(address payer, address token, uint256 amount, bytes memory data) private {
        (uint256 value, uint256 deadline, uint8 v, bytes32 r, bytes32 s) =
            abi.decode(data, (uint256, uint256, uint8, bytes32, bytes32));
        if (value != amount) revert Permit2612AmountMismatch();
        _tryPermit2612(token, payer, value, deadline, v, r, s);
    }
}
