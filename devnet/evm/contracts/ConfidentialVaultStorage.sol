// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {ebool, euint64, euint128} from "@fhevm/solidity/lib/FHE.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";

/// @title ConfidentialVaultStorage
/// @notice The confidential settlement vault's constants, types, storage and
///         errors, shared by the vault (`ConfidentialSettlementVault`, which
///         holds and moves the money) and its read-only lens
///         (`ConfidentialVaultLens`, whose code the vault runs on this very
///         storage for the reads it leaves out). One declaration, so the two
///         cannot disagree on where anything is stored.
abstract contract ConfidentialVaultStorage {
    // ---- constants ----

    uint256 public constant DAY = 1 days;
    /// @notice How long after its day ends a payment becomes redeemable by
    ///         its opening, if the day is not closed by then: the batch's turn.
    uint256 public constant REDEMPTION_DELAY = 1 days;
    /// @notice How long a debited withdrawal waits for finalization before
    ///         its merchant may cancel it.
    uint256 public constant FINALIZATION_TIMEOUT = 24 hours;
    /// @notice The shortest challenge window a deployed vault accepts: every
    ///         merchant's watcher gets at least a day to check a close.
    uint256 public constant MIN_CHALLENGE_WINDOW = 1 days;
    /// @notice The longest: `closedAt + window` never overflows, and a day's
    ///         credits wait at most this long.
    uint256 public constant MAX_CHALLENGE_WINDOW = 30 days;
    /// @notice How long a freeze waits for the bond owner: after it, anyone
    ///         may end it (`endFreeze`), and the vault winds down without an
    ///         operator rather than stay frozen for good.
    uint256 public constant MAX_FREEZE = 14 days;
    /// @notice Slots are credited every day, so their number bounds a close's cost.
    uint256 public constant MAX_SLOTS = 4096;
    /// @notice The smallest challenge bounty a deployed vault accepts, in
    ///         USDC base units: 0.01 USDC per proof and 0.001 USDC per
    ///         opening presented (what a proof's gas costs on an L2 at a
    ///         fraction of a gwei), so no deployment makes proving a small
    ///         theft a loss for its challenger.
    uint256 public constant MIN_CHALLENGE_BOUNTY_BASE = 10_000;
    uint256 public constant MIN_CHALLENGE_BOUNTY_PER_OPENING = 1_000;

    bytes32 internal constant EIP712_DOMAIN_TYPEHASH =
        keccak256("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)");
    bytes32 internal constant NAME_HASH = keccak256("x402 Confidential Settlement");
    bytes32 internal constant VERSION_HASH = keccak256("1");
    /// @dev The operator's word that `commitment` goes with payment `key`.
    bytes32 internal constant ATTRIBUTION_TYPEHASH = keccak256("Attribution(bytes32 key,bytes32 commitment)");
    bytes32 internal constant WITHDRAW_TYPEHASH =
        keccak256("Withdraw(uint256 slot,address to,uint64 amount,uint64 nonce,uint64 deadline)");

    /// @notice Payment states (`payment`'s `state`): 1 collected, 2 redeemed, 3 returned.
    uint8 internal constant PAYMENT_COLLECTED = 1;
    uint8 internal constant PAYMENT_REDEEMED = 2;
    uint8 internal constant PAYMENT_RETURNED = 3;

    /// @notice Day phases (`dayInfo`'s `phase`), 0 to 3: open to payments, then to the batch's credits
    ///         (and to redemptions); closing while the KMS decrypts the
    ///         check; closed once the check was proven true (challengeable
    ///         for `challengeWindow`, then released); disputed once a
    ///         challenge proved a slot's credit short (nothing of its split
    ///         is released; it reopens when the bond owner resumes).
    uint8 internal constant DAY_OPEN = 0;
    uint8 internal constant DAY_CLOSING = 1;
    uint8 internal constant DAY_CLOSED = 2;
    uint8 internal constant DAY_DISPUTED = 3;

    uint8 internal constant CHALLENGE_OPEN = 1;
    uint8 internal constant CHALLENGE_RESOLVED = 2;

    uint8 internal constant WITHDRAWAL_DEBITED = 1;
    uint8 internal constant WITHDRAWAL_FINALIZED = 2;
    uint8 internal constant WITHDRAWAL_CANCELLED = 3;

    /// @dev `_creditedIn` value of a slot whose credit for the day was released.
    uint32 internal constant RELEASED = type(uint32).max;

    // ---- types ----

    /// @notice A receipt: what opens a payment's commitment.
    struct Opening {
        bytes32 key;
        bytes32 blinding;
    }

    /// @notice The challenge bounty, in USDC base units: `base` once per
    ///         slot, day and attempt whose openings prove a shortfall, and
    ///         `perOpening` for each of those openings.
    struct Bounty {
        uint64 base;
        uint64 perOpening;
    }

    struct WithdrawRequest {
        uint256 slot;
        address to;
        uint64 amount;
        uint64 nonce;
        uint64 deadline;
    }

    /// @dev One storage word: what the vault collected for one authorization.
    struct Payment {
        address payer;
        uint64 amount;
        uint24 day;
        uint8 state;
    }

    struct Slot {
        bytes32 commitment;
        euint64 balance;
        uint64 withdrawNonce;
        /// @dev Set by the first withdrawal, which names the merchant anyway;
        ///      from then on its wallet may decrypt its balance.
        address revealedOwner;
        /// @dev Committed at assignment, never changed: an address of the
        ///      merchant's own tools, unlinkable to its wallet, that may
        ///      decrypt every pending credit and balance of the slot, so
        ///      the merchant checks its credit without the operator
        ///      (0: none).
        address viewer;
    }

    struct DayState {
        uint64 collected;
        uint64 redeemed;
        uint64 returned;
        uint32 payments;
        /// @dev Bumped when an attempt's credits are discarded (the KMS proved
        ///      them wrong, or the day was disputed and resumed).
        uint32 attempt;
        uint32 slotsCredited;
        uint32 slotsReleased;
        uint8 phase;
        /// @dev When `finalizeDay` closed it: its challenge window starts.
        uint40 closedAt;
        /// @dev Challenges of the current attempt awaiting the KMS's answer.
        uint32 openChallenges;
        /// @dev What of `bondCommitted` this day holds: its pool at close,
        ///      less the penalties it paid; 0 when it holds nothing.
        uint64 bondShare;
        /// @dev Its index in `_heldDays` + 1 while it is closing, closed and
        ///      not yet released, or disputed (0: not held).
        uint32 heldAt;
        /// @dev The attempt's credits, summed in 128 bits: 2^32 slots of
        ///      at most 2^64 - 1 each cannot wrap it.
        euint128 creditedSum;
        ebool matches;
    }

    /// @dev One slot's openings of one day against its credit in one attempt.
    struct Challenge {
        uint256 slot;
        uint32 day;
        uint32 attempt;
        uint8 state;
        /// @dev What this challenge's own openings add up to.
        uint64 amount;
        /// @dev The KMS's answer: the credit's shortfall (0: none).
        uint64 shortfall;
        /// @dev Its index in its day's `_openChallengeIds` + 1 while open (0: resolved).
        uint32 openAt;
        /// @dev Encrypted: every opening of the slot for the day and attempt,
        ///      less its credit, when that is positive; else 0.
        euint64 handle;
    }

    /// @dev A slot's openings of a day in one attempt, the shortfall already
    ///      paid for them, how many there are, how many a bounty paid for
    ///      (0: none yet, so the next proof also pays the base), and the
    ///      bounties paid. One storage word.
    struct Presented {
        uint64 amount;
        uint64 penalized;
        uint32 openings;
        uint32 rewarded;
        uint64 bounty;
    }

    struct Withdrawal {
        uint256 slot;
        address to;
        uint64 amount;
        uint64 requestedAt;
        uint8 state;
        bool paid;
        ebool debited;
    }

    // ---- storage ----

    bool internal _initialized;
    IERC20 public asset;
    address public operator;
    /// @notice The block `initialize` ran in: where reading this vault's logs may start.
    uint256 public deploymentBlock;

    uint256 public slotCount;
    mapping(uint256 => Slot) internal _slots;
    /// @dev commitment => slot id + 1 (0: none), so assignment is idempotent.
    mapping(bytes32 => uint256) internal _slotOfCommitment;
    /// @dev slot => day => attempt + 1 the slot was credited in (RELEASED once released).
    mapping(uint256 => mapping(uint256 => uint32)) internal _creditedIn;
    /// @dev slot => day => the slot's credit of the day, pending until released.
    mapping(uint256 => mapping(uint256 => euint64)) internal _pending;

    /// @dev payment key (payer, nonce) => the payment the vault collected.
    mapping(bytes32 => Payment) internal _payments;
    /// @dev payment key => its commitment to a slot (0: unattributed).
    mapping(bytes32 => bytes32) internal _commitments;
    /// @dev payment key => attempt + 1 of its day in which it was presented.
    mapping(bytes32 => uint32) internal _presentedIn;
    /// @dev day => index => payment key; the day's `payments` counts them.
    mapping(uint256 => mapping(uint256 => bytes32)) internal _dayPayments;
    mapping(uint256 => DayState) internal _days;

    uint256 public totalCollected;
    uint256 public totalReturned;
    uint256 public totalCredited;
    uint256 public totalPaidOut;

    uint256 public withdrawalCount;
    mapping(uint256 => Withdrawal) internal _withdrawals;
    /// @dev slot => withdrawal nonce => withdrawal id + 1, so a request is found without logs.
    mapping(uint256 => mapping(uint64 => uint256)) internal _withdrawalOf;

    /// @notice Holds the operator bond: withdraws what no day needs, and
    ///         alone lifts a freeze (a cold key; the operator cannot touch the bond).
    address public bondOwner;
    /// @notice Seconds between a day's close and the release of its credits.
    uint256 public challengeWindow;
    /// @notice USDC held against proven misattribution.
    uint256 public bond;
    /// @notice What the days closing, closed and not yet released, or disputed hold of the bond.
    uint256 public bondCommitted;
    /// @notice Set by a proven shortfall: no day closes or releases until the bond owner resumes.
    bool public frozen;
    /// @notice When the freeze began (0: never frozen); `MAX_FREEZE` later anyone may end it.
    uint256 public frozenAt;
    /// @notice The operator key whose split was last proven short: never an operator again.
    address public disputedOperator;
    /// @notice Paid from the bond into shorted slots' balances, for good:
    ///         shortfalls and challenge bounties (`totalBounties`).
    uint256 public totalPenalties;
    /// @dev The days closing, closed and not yet released, or disputed:
    ///      everything a freeze holds and a resume reopens.
    uint256[] internal _heldDays;
    uint256 public challengeCount;
    mapping(uint256 => Challenge) internal _challenges;
    /// @dev keccak256(slot, day, attempt) => what the slot's openings showed.
    mapping(bytes32 => Presented) internal _presented;
    /// @notice Answers every read the vault leaves out (`ConfidentialVaultLens`,
    ///         run on this storage by the vault's fallback); set once.
    address public lens;
    /// @notice Hears challenges and keeps the bond (`ConfidentialVaultCourt`,
    ///         run on this storage by the vault's fallback); set once.
    address public court;
    /// @dev day => the ids of its challenges awaiting the KMS's answer, so
    ///      whoever submits the answers reads them without scanning every
    ///      challenge ever made or any log.
    mapping(uint256 => uint256[]) internal _openChallengeIds;
    /// @notice Paid from the bond, besides the shortfall, to a slot whose
    ///         challenges prove a shortfall: once per slot, day and attempt
    ///         (USDC base units); set once.
    uint256 public challengeBountyBase;
    /// @notice And for each opening that slot presented in that attempt; set once.
    uint256 public challengeBountyPerOpening;
    /// @notice The bounties paid, all of them also counted in `totalPenalties`.
    uint256 public totalBounties;

    // ---- errors ----

    error AlreadyInitialized();
    error BadChallengeWindow(uint256 window);
    error BadChallengeBounty(uint256 base, uint256 perOpening);
    error NotOperator();
    error BadOperator(address operator);
    error UnknownSlot(uint256 slot);
    error TooManySlots();
    error NotPaidToVault(address to);
    error BadAmount(uint256 amount);
    error AlreadyCollected(bytes32 paymentKey);
    error PaymentShort(uint256 received, uint256 expected);
    error DayNotOver(uint256 day);
    error DayNotOpen(uint256 day, uint8 phase);
    error DayNotClosing(uint256 day);
    error DayNotClosed(uint256 day);
    error DayIncomplete(uint256 day, uint256 credited, uint256 slots);
    error LengthMismatch();
    error PaymentNotCollected(bytes32 paymentKey);
    error NotTheOpening(bytes32 paymentKey);
    error PaymentNotOfDay(bytes32 paymentKey);
    error RedemptionNotOpen(uint256 opensAt);
    error InvalidSignature();
    error Insolvent(uint256 owed, uint256 holdings);
    error NotStray(uint256 amount, uint256 stray);
    error RequestExpired();
    error WrongWithdrawNonce(uint64 expected);
    error NotSlotOwner();
    error ZeroAmount();
    error UnknownWithdrawal(uint256 id);
    error NotDebited(uint256 id);
    error NotWithdrawalOwner();
    error TooEarlyToCancel(uint256 cancellableAt);
    error NotBondOwner();
    error OperatorFrozen();
    error NotFrozen();
    error BondTooLow(uint256 bond, uint256 required);
    /// @dev Or a challenge of the day is still open.
    error ChallengeWindowOpen(uint256 endsAt);
    error NotChallengeable(uint256 day);
    error AlreadyPresented(bytes32 paymentKey);
    error ChallengeNotOpen(uint256 id);
    error ChallengesOpen(uint256 day);
    error FreezeNotOver(uint256 endsAt);

    /// @dev keccak256(slot, day, attempt): where `_presented` keeps a slot's openings of a day.
    function _presentedKey(uint256 slot, uint256 day, uint32 attempt) internal pure returns (bytes32) {
        return keccak256(abi.encode(slot, day, attempt));
    }
}
