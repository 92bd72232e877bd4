// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {DevnetPermit2} from "./DevnetPermit2.sol";
import {DevnetPermit2612Attempt} from "./DevnetPermit2612Attempt.sol";

/// @title DevnetX402ExactPermit2Proxy
/// @notice The x402 `exact` Permit2 proxy for local chains: the same ABI
///         (`settle`, `settleWithPermit`, `PERMIT2`, `WITNESS_TYPEHASH`,
///         `WITNESS_TYPE_STRING`, events and errors) and behaviour as
///         x402-foundation's x402ExactPermit2Proxy. It is the spender the
///         payer signs for, and the witness {to, validAfter} binds the
///         destination, so whoever submits the transaction cannot redirect
///         the payment.
/// @dev Placed at 0x402085c248EeA27D92E8b30b2C58ed07f9E20001 with
///      `anvil_setCode`: no constructor runs, so the Permit2 address is a
///      constant, not an immutable. The reentrancy guard uses transient
///      storage (EIP-1153, cancun), so it needs no initialization either.
contract DevnetX402ExactPermit2Proxy is DevnetPermit2612Attempt {
    struct Witness {
        address to;
        uint256 validAfter;
    }

    struct EIP2612Permit {
        uint256 value;
        uint256 deadline;
        bytes32 r;
        bytes32 s;
        uint8 v;
    }

    /// @notice The canonical Permit2.
    DevnetPermit2 public constant PERMIT2 = DevnetPermit2(0x000000000022D473030F116dDEE9F6B43aC78BA3);

    bytes32 public constant WITNESS_TYPEHASH = keccak256("Witness(address to,uint256 validAfter)");
    /// @notice Completes Permit2's PermitWitnessTransferFrom type: the witness
    ///         field, then every referenced struct type in alphabetical order.
    string public constant WITNESS_TYPE_STRING =
        "Witness witness)TokenPermissions(address token,uint256 amount)Witness(address to,uint256 validAfter)";

    /// @dev Reentrancy flag in transient storage: cleared at the end of every
    ///      guarded call, and needs no initialization.
    bool private transient _entered;

    event Settled();
    event SettledWithPermit();

    error InvalidAmount();
    error InvalidDestination();
    error InvalidOwner();
    error InvalidPermit2Address();
    error PaymentTooEarly();
    error Permit2612AmountMismatch();
    error ReentrancyGuardReentrantCall();

    modifier nonReentrant() {
        if (_entered) revert ReentrancyGuardReentrantCall();
        _entered = true;
        _;
        _entered = false;
    }

    /// @notice Moves the full permitted amount from `owner` to `witness.to`.
    function settle(
        DevnetPermit2.PermitTransferFrom calldata permit,
        address owner,
        Witness calldata witness,
        bytes calldata signature
    ) external nonReentrant {
        _settle(permit, owner, witness, signature);
        emit Settled();
    }

    /// @notice As `settle`, first trying the token's EIP-2612 `permit` to approve
    ///         Permit2 (a failed permit is reported in an event, not a revert:
    ///         the approval may already exist).
    function settleWithPermit(
        EIP2612Permit calldata permit2612,
        DevnetPermit2.PermitTransferFrom calldata permit,
        address owner,
        Witness calldata witness,
        bytes calldata signature
    ) external nonReentrant {
        if (permit2612.value != permit.permitted.amount) revert Permit2612AmountMismatch();
        _tryPermit2612(
            permit.permitted.token, owner, permit2612.value, permit2612.deadline, permit2612.v, permit2612.r, permit2612.s
        );
        _settle(permit, owner, witness, signature);
        emit SettledWithPermit();
    }

    function _settle(
        DevnetPermit2.PermitTransferFrom calldata permit,
        address owner,
        Witness calldata witness,
        bytes calldata signature
    ) private {
        uint256 amount = permit.permitted.amount;
        if (amount == 0) revert InvalidAmount();
        if (owner == address(0)) revert InvalidOwner();
        if (witness.to == address(0)) revert InvalidDestination();
        if (block.timestamp < witness.validAfter) revert PaymentTooEarly();
        bytes32 witnessHash = keccak256(abi.encode(WITNESS_TYPEHASH, witness.to, witness.validAfter));
        PERMIT2.permitWitnessTransferFrom(
            permit,
            DevnetPermit2.SignatureTransferDetails({to: witness.to, requestedAmount: amount}),
            owner,
            witnessHash,
            WITNESS_TYPE_STRING,
            signature
        );
    }
}
