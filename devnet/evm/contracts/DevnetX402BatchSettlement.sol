// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {ECDSA} from "@openzeppelin/contracts/utils/cryptography/ECDSA.sol";
import {SignatureChecker} from "@openzeppelin/contracts/utils/cryptography/SignatureChecker.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {Multicall} from "@openzeppelin/contracts/utils/Multicall.sol";
import {ReentrancyGuardTransient} from "@openzeppelin/contracts/utils/ReentrancyGuardTransient.sol";

/// @notice What a deposit collector does: pull `amount` of `token` from `payer`
///         into the escrow, authorised by whatever `data` carries.
interface IDevnetDepositCollector {
    function collect(address payer, address token, uint256 amount, bytes32 channelId, bytes calldata data) external;
}

/// @title DevnetX402BatchSettlement
/// @notice The x402 `batch-settlement` escrow for local chains, with the same
///         ABI and behaviour as x402-foundation's x402BatchSettlement:
///         - a payer escrows tokens in a channel (identified by the EIP-712
///           hash of its immutable config) through a pluggable collector;
///         - the payer then pays per request with off-chain vouchers, each a
///           signed cumulative ceiling;
///         - the receiver side claims vouchers in batches (itself, or anyone
///           with its authorizer's signature over the batch), which moves the
///           claimed amounts from the channels to the receiver's account here;
///         - `settle` pays a receiver's claimed total out; `refund` returns the
///           unclaimed rest to the payer; a payer who is not refunded can leave
///           through a timed withdrawal.
/// @dev Placed at 0x4020074e9dF2ce1deE5A9C1b5c3f541D02a10003 with
///      `anvil_setCode`, so nothing may depend on a constructor: the EIP-712
///      domain separator is computed on every use from `block.chainid` and
///      `address(this)` (OpenZeppelin's EIP712 keeps it in immutables), and the
///      reentrancy guard lives in transient storage.
contract DevnetX402BatchSettlement is Multicall, ReentrancyGuardTransient {
    using SafeERC20 for IERC20;

    struct ChannelConfig {
        address payer;
        address payerAuthorizer;
        address receiver;
        address receiverAuthorizer;
        address token;
        uint40 withdrawDelay;
        bytes32 salt;
    }

    struct ChannelState {
        uint128 balance;
        uint128 totalClaimed;
    }

    struct WithdrawalState {
        uint128 amount;
        uint40 initiatedAt;
    }

    struct ReceiverState {
        uint128 totalClaimed;
        uint128 totalSettled;
    }

    struct Voucher {
        ChannelConfig channel;
        uint128 maxClaimableAmount;
    }

    /// @dev `totalClaimed` is cumulative, so replaying an applied claim changes nothing.
    struct VoucherClaim {
        Voucher voucher;
        bytes signature;
        uint128 totalClaimed;
    }

    uint40 public constant MIN_WITHDRAW_DELAY = 15 minutes;
    uint40 public constant MAX_WITHDRAW_DELAY = 30 days;

    bytes32 public constant CHANNEL_CONFIG_TYPEHASH = keccak256(
        "ChannelConfig(address payer,address payerAuthorizer,address receiver,address receiverAuthorizer,address token,uint40 withdrawDelay,bytes32 salt)"
    );
    bytes32 public constant VOUCHER_TYPEHASH = keccak256("Voucher(bytes32 channelId,uint128 maxClaimableAmount)");
    bytes32 public constant REFUND_TYPEHASH = keccak256("Refund(bytes32 channelId,uint256 nonce,uint128 amount)");
    bytes32 public constant CLAIM_ENTRY_TYPEHASH =
        keccak256("ClaimEntry(bytes32 channelId,uint128 maxClaimableAmount,uint128 totalClaimed)");
    bytes32 public constant CLAIM_BATCH_TYPEHASH = keccak256(
        "ClaimBatch(ClaimEntry[] claims)ClaimEntry(bytes32 channelId,uint128 maxClaimableAmount,uint128 totalClaimed)"
    );
    bytes32 private constant DOMAIN_TYPEHASH =
        keccak256("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)");
    bytes32 private constant NAME_HASH = keccak256("x402 Batch Settlement");
    bytes32 private constant VERSION_HASH = keccak256("1");

    mapping(bytes32 channelId => ChannelState) public channels;
    mapping(bytes32 channelId => uint256) public refundNonce;
    mapping(bytes32 channelId => WithdrawalState) public pendingWithdrawals;
    mapping(address receiver => mapping(address token => ReceiverState)) public receivers;

    event ChannelCreated(bytes32 indexed channelId, ChannelConfig config);
    event ChannelClosed(bytes32 indexed channelId, ChannelConfig config);
    event Deposited(bytes32 indexed channelId, address indexed sender, uint128 amount, uint128 newBalance);
    event Claimed(bytes32 indexed channelId, address indexed sender, uint128 claimAmount, uint128 newTotalClaimed);
    event Settled(address indexed receiver, address indexed token, address indexed sender, uint128 amount);
    event Refunded(bytes32 indexed channelId, address indexed sender, uint128 amount);
    event WithdrawInitiated(bytes32 indexed channelId, uint128 amount, uint40 finalizeAfter);
    event WithdrawFinalized(bytes32 indexed channelId, address indexed sender, uint128 amount);

    error InvalidChannel();
    error ZeroDeposit();
    error DepositOverflow();
    error InvalidSignature();
    error NotReceiverAuthorizer();
    error NotAuthorizedToClaim();
    error NotAuthorizedToRefund();
    error ClaimExceedsCeiling();
    error ClaimExceedsBalance();
    error WithdrawalAlreadyPending();
    error WithdrawalNotPending();
    error NotAuthorizedToFinalizeWithdraw();
    error WithdrawDelayNotElapsed();
    error NothingToWithdraw();
    error WithdrawAmountExceedsAvailable();
    error WithdrawDelayOutOfRange();
    error EmptyBatch();
    error DepositCollectionFailed();
    error InvalidCollector();
    error InvalidRefundNonce();
    error ZeroRefund();

    // ---- deposits ---------------------------------------------------------

    /// @notice Escrows exactly `amount` into the channel of `config`, pulled by `collector`.
    function deposit(ChannelConfig calldata config, uint128 amount, address collector, bytes calldata collectorData)
        external
        nonReentrant
    {
        if (
            config.payer == address(0) || config.receiver == address(0) || config.receiverAuthorizer == address(0)
                || config.token == address(0)
        ) revert InvalidChannel();
        if (config.withdrawDelay < MIN_WITHDRAW_DELAY || config.withdrawDelay > MAX_WITHDRAW_DELAY) {
            revert WithdrawDelayOutOfRange();
        }
        if (amount == 0) revert ZeroDeposit();
        if (collector == address(0)) revert InvalidCollector();

        bytes32 channelId = getChannelId(config);
        ChannelState storage channel = channels[channelId];
        if (amount > type(uint128).max - channel.balance) revert DepositOverflow();
        bool opening = channel.balance == 0 && channel.totalClaimed == 0;
        channel.balance += amount;

        // The collector does the pull; what counts is what actually arrived.
        uint256 held = IERC20(config.token).balanceOf(address(this));
        IDevnetDepositCollector(collector).collect(config.payer, config.token, amount, channelId, collectorData);
        if (IERC20(config.token).balanceOf(address(this)) != held + amount) revert DepositCollectionFailed();

        if (opening) emit ChannelCreated(channelId, config);
        emit Deposited(channelId, msg.sender, amount, channel.balance);
    }

    // ---- claims and payout --------------------------------------------------

    /// @notice Applies voucher claims; the caller must be each channel's receiver or receiver authorizer.
    function claim(VoucherClaim[] calldata voucherClaims) external nonReentrant {
        if (voucherClaims.length == 0) revert EmptyBatch();
        for (uint256 i = 0; i < voucherClaims.length; ++i) {
            if (!_onReceiverSide(msg.sender, voucherClaims[i].voucher.channel)) revert NotAuthorizedToClaim();
            _applyClaim(voucherClaims[i]);
        }
    }

    /// @notice Applies voucher claims authorised by the shared receiver authorizer's
    ///         signature over the whole batch; anyone may submit (a facilitator does).
    function claimWithSignature(VoucherClaim[] calldata voucherClaims, bytes calldata authorizerSignature)
        external
        nonReentrant
    {
        if (voucherClaims.length == 0) revert EmptyBatch();
        address authorizer = voucherClaims[0].voucher.channel.receiverAuthorizer;
        if (!SignatureChecker.isValidSignatureNow(authorizer, getClaimBatchDigest(voucherClaims), authorizerSignature))
        {
            revert InvalidSignature();
        }
        for (uint256 i = 0; i < voucherClaims.length; ++i) {
            if (voucherClaims[i].voucher.channel.receiverAuthorizer != authorizer) revert NotReceiverAuthorizer();
            _applyClaim(voucherClaims[i]);
        }
    }

    /// @notice Pays `receiver` everything claimed for it in `token` and not yet paid. Anyone may call.
    function settle(address receiver, address token) external nonReentrant {
        ReceiverState storage account = receivers[receiver][token];
        uint128 amount = account.totalClaimed - account.totalSettled;
        if (amount == 0) return;
        account.totalSettled = account.totalClaimed;
        IERC20(token).safeTransfer(receiver, amount);
        emit Settled(receiver, token, msg.sender, amount);
    }

    // ---- leaving a channel -------------------------------------------------

    /// @notice Payer side: starts a timed withdrawal of unclaimed escrow.
    function initiateWithdraw(ChannelConfig calldata config, uint128 amount) external nonReentrant {
        if (msg.sender != config.payer && msg.sender != config.payerAuthorizer) revert InvalidChannel();
        if (amount == 0) revert NothingToWithdraw();
        bytes32 channelId = getChannelId(config);
        WithdrawalState storage pending = pendingWithdrawals[channelId];
        if (pending.initiatedAt != 0) revert WithdrawalAlreadyPending();
        ChannelState storage channel = channels[channelId];
        if (amount > channel.balance - channel.totalClaimed) revert WithdrawAmountExceedsAvailable();
        pending.amount = amount;
        pending.initiatedAt = uint40(block.timestamp);
        emit WithdrawInitiated(channelId, amount, uint40(block.timestamp) + config.withdrawDelay);
    }

    /// @notice Payer side: completes a withdrawal once the delay passed, capped at what is unclaimed then.
    function finalizeWithdraw(ChannelConfig calldata config) external nonReentrant {
        if (msg.sender != config.payer && msg.sender != config.payerAuthorizer) {
            revert NotAuthorizedToFinalizeWithdraw();
        }
        bytes32 channelId = getChannelId(config);
        WithdrawalState storage pending = pendingWithdrawals[channelId];
        if (pending.initiatedAt == 0) revert WithdrawalNotPending();
        if (block.timestamp < uint256(pending.initiatedAt) + uint256(config.withdrawDelay)) {
            revert WithdrawDelayNotElapsed();
        }
        ChannelState storage channel = channels[channelId];
        uint128 unclaimed = channel.balance - channel.totalClaimed;
        uint128 amount = pending.amount > unclaimed ? unclaimed : pending.amount;
        pending.amount = 0;
        pending.initiatedAt = 0;
        channel.balance -= amount;
        emit WithdrawFinalized(channelId, msg.sender, amount);
        if (channel.balance == 0 && channel.totalClaimed == 0) emit ChannelClosed(channelId, config);
        if (amount > 0) IERC20(config.token).safeTransfer(config.payer, amount);
    }

    /// @notice Receiver side: returns up to `amount` of unclaimed escrow to the payer.
    function refund(ChannelConfig calldata config, uint128 amount) external nonReentrant {
        if (!_onReceiverSide(msg.sender, config)) revert NotAuthorizedToRefund();
        _refund(config, amount);
    }

    /// @notice As `refund`, authorised by the receiver authorizer's signature at the current nonce.
    function refundWithSignature(
        ChannelConfig calldata config,
        uint128 amount,
        uint256 nonce,
        bytes calldata receiverAuthorizerSignature
    ) external nonReentrant {
        bytes32 channelId = getChannelId(config);
        if (nonce != refundNonce[channelId]) revert InvalidRefundNonce();
        if (
            !SignatureChecker.isValidSignatureNow(
                config.receiverAuthorizer, getRefundDigest(channelId, nonce, amount), receiverAuthorizerSignature
            )
        ) revert InvalidSignature();
        _refund(config, amount);
    }

    // ---- EIP-712 -------------------------------------------------------------

    /// @notice The channel id: the EIP-712 hash of its config under this contract's domain.
    function getChannelId(ChannelConfig calldata config) public view returns (bytes32) {
        return _typedDataHash(keccak256(abi.encode(CHANNEL_CONFIG_TYPEHASH, config)));
    }

    function getVoucherDigest(bytes32 channelId, uint128 maxClaimableAmount) public view returns (bytes32) {
        return _typedDataHash(keccak256(abi.encode(VOUCHER_TYPEHASH, channelId, maxClaimableAmount)));
    }

    function getRefundDigest(bytes32 channelId, uint256 nonce, uint128 amount) public view returns (bytes32) {
        return _typedDataHash(keccak256(abi.encode(REFUND_TYPEHASH, channelId, nonce, amount)));
    }

    /// @notice What a receiver authorizer signs for `claimWithSignature`: a ClaimBatch of ClaimEntry rows.
    function getClaimBatchDigest(VoucherClaim[] calldata voucherClaims) public view returns (bytes32) {
        bytes32[] memory rows = new bytes32[](voucherClaims.length);
        for (uint256 i = 0; i < voucherClaims.length; ++i) {
            rows[i] = keccak256(
                abi.encode(
                    CLAIM_ENTRY_TYPEHASH,
                    getChannelId(voucherClaims[i].voucher.channel),
                    voucherClaims[i].voucher.maxClaimableAmount,
                    voucherClaims[i].totalClaimed
                )
            );
        }
        // An EIP-712 array is encoded as the hash of its concatenated element hashes.
        return _typedDataHash(keccak256(abi.encode(CLAIM_BATCH_TYPEHASH, keccak256(abi.encodePacked(rows)))));
    }

    /// @notice The EIP-712 domain separator, {name: "x402 Batch Settlement", version: "1"}.
    function domainSeparator() public view returns (bytes32) {
        return keccak256(abi.encode(DOMAIN_TYPEHASH, NAME_HASH, VERSION_HASH, block.chainid, address(this)));
    }

    // ---- internals -----------------------------------------------------------

    function _typedDataHash(bytes32 structHash) private view returns (bytes32) {
        return keccak256(abi.encodePacked(hex"1901", domainSeparator(), structHash));
    }

    function _onReceiverSide(address sender, ChannelConfig calldata config) private pure returns (bool) {
        return sender == config.receiver || sender == config.receiverAuthorizer;
    }

    /// @dev Checks the payer's (or its authorizer's) voucher signature and moves
    ///      the newly claimed part from the channel to the receiver's account.
    function _applyClaim(VoucherClaim calldata vc) private {
        bytes32 channelId = getChannelId(vc.voucher.channel);
        ChannelState storage channel = channels[channelId];
        if (vc.totalClaimed <= channel.totalClaimed) return; // already applied
        if (vc.totalClaimed > vc.voucher.maxClaimableAmount) revert ClaimExceedsCeiling();
        if (vc.totalClaimed > channel.balance) revert ClaimExceedsBalance();

        bytes32 digest = getVoucherDigest(channelId, vc.voucher.maxClaimableAmount);
        address payerAuthorizer = vc.voucher.channel.payerAuthorizer;
        bool valid = payerAuthorizer != address(0)
            ? ECDSA.recoverCalldata(digest, vc.signature) == payerAuthorizer
            : SignatureChecker.isValidSignatureNow(vc.voucher.channel.payer, digest, vc.signature);
        if (!valid) revert InvalidSignature();

        uint128 newlyClaimed = vc.totalClaimed - channel.totalClaimed;
        channel.totalClaimed = vc.totalClaimed;
        receivers[vc.voucher.channel.receiver][vc.voucher.channel.token].totalClaimed += newlyClaimed;
        emit Claimed(channelId, msg.sender, newlyClaimed, vc.totalClaimed);
    }

    /// @dev Every executed refund advances the channel's refund nonce, even one
    ///      that finds nothing to return, so a signature for an older nonce dies.
    function _refund(ChannelConfig calldata config, uint128 amount) private {
        if (amount == 0) revert ZeroRefund();
        bytes32 channelId = getChannelId(config);
        unchecked {
            refundNonce[channelId]++;
        }
        ChannelState storage channel = channels[channelId];
        uint128 unclaimed = channel.balance - channel.totalClaimed;
        uint128 refunded = amount > unclaimed ? unclaimed : amount;
        if (refunded == 0) return;
        channel.balance -= refunded;

        WithdrawalState storage pending = pendingWithdrawals[channelId];
        if (pending.initiatedAt != 0) {
            if (refunded >= pending.amount) {
                pending.amount = 0;
                pending.initiatedAt = 0;
            } else {
                pending.amount -= refunded;
            }
        }
        emit Refunded(channelId, msg.sender, refunded);
        if (channel.balance == 0 && channel.totalClaimed == 0) emit ChannelClosed(channelId, config);
        IERC20(config.token).safeTransfer(config.payer, refunded);
    }
}
