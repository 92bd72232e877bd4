// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {FHE, ebool, euint64, euint128, externalEuint64} from "@fhevm/solidity/lib/FHE.sol";
import {CoprocessorConfig} from "@fhevm/solidity/lib/Impl.sol";
import {FHESafeMath} from "@openzeppelin/confidential-contracts/utils/FHESafeMath.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {ECDSA} from "@openzeppelin/contracts/utils/cryptography/ECDSA.sol";
import {MessageHashUtils} from "@openzeppelin/contracts/utils/cryptography/MessageHashUtils.sol";
import {SignatureChecker} from "@openzeppelin/contracts/utils/cryptography/SignatureChecker.sol";

/// @dev The two forms of USDC's EIP-3009 `transferWithAuthorization` (v2.2
///      takes a `bytes` signature too, for smart-contract wallets).
interface IEIP3009 {
    function transferWithAuthorization(
        address from,
        address to,
        uint256 value,
        uint256 validAfter,
        uint256 validBefore,
        bytes32 nonce,
        uint8 v,
        bytes32 r,
        bytes32 s
    ) external;

    function transferWithAuthorization(
        address from,
        address to,
        uint256 value,
        uint256 validAfter,
        uint256 validBefore,
        bytes32 nonce,
        bytes calldata signature
    ) external;
}

/// @title ConfidentialSettlementVault
/// @notice Holds the USDC of confidential x402 payments and one encrypted
///         balance per merchant slot, so the chain never shows which merchant
///         a payment pays. No key can create balance the vault was not paid:
///         the vault collects every payment itself, and a day's encrypted
///         credits become spendable only once the KMS has proven that they
///         add up to exactly what the vault collected that day.
/// @dev How money moves:
///      1. `collect`: the payer's ordinary EIP-3009 authorization to this
///         vault, executed by the vault itself, which records payer, nonce,
///         amount and UTC day and checks that its balance grew by exactly the
///         amount. Anyone may call it; the USDC only ever comes in.
///      2. The operator's batch for an ended day: `creditSlots` writes every
///         slot's encrypted credit into a pending bucket (not spendable),
///         summed in 128 bits so no credit can wrap the sum; `closeDay`
///         (refused while the operator bond is short) publishes `sum == what
///         the day collected` for the KMS to decrypt; `finalizeDay` (anyone,
///         with the KMS proof) either closes the day or, when the credits do
///         not add up, throws them away for a new attempt. A closed day's
///         challenge window then runs (`challengeWindow`); only after it,
///         with no challenge open, does `release` (anyone) move each slot's
///         credit into its balance.
///      2b. During the window a merchant's wallet presents its receipts of
///         the day (`challenge`): each is checked against the vault's own
///         record of the payment, and the slot's credit is compared, under
///         encryption, with the receipts' sum; the KMS decrypts only whether
///         it falls short (`resolveChallenge`). A shortfall is proven fraud:
///         the day is disputed (none of its credits is ever released as
///         split), the merchant is paid its receipts from the operator bond,
///         and no day can close until the bond owner `resume`s, which
///         reopens the disputed day for an honest split.
///      3. A merchant whose day is not closed a day after it ended redeems
///         its receipts (our signature over one payment) against the
///         vault's own record of that payment: same amount, same day, once.
///      4. Withdrawals debit obliviously (the amount, or nothing when the
///         balance is short); the KMS-signed outcome releases the USDC; after
///         24 hours unfinalized the merchant may cancel and the debit is undone.
///      What the operator key can still do: assign slots, delay a day,
///      return a payment of a day not yet closing to its own payer, send back
///      USDC that reached the vault outside `collect`, and choose how a day's
///      collected total is split between slots (the split must add up); a
///      split that shorts a merchant who challenges is paid from the bond and
///      releases nothing of the day. It cannot mint, wrap a credit around,
///      spend pending credit, move a merchant's balance, or touch the bond.
///
///      Invariants:
///      - A slot is bound to `keccak256(abi.encode(merchant, salt))` when
///        assigned and never rebound. No merchant address is stored or logged
///        until that merchant withdraws or redeems (which name it, as they must).
///      - Every collected payment is in exactly one of: its day's pool (until
///        the day closes, then in slot balances), a redemption, returned, or
///        claimed from the bond by a challenge that proved its day's split short.
///      - collected - returned - claimed - paid out + bond <= the vault's USDC;
///        credited (closed days and redemptions) - paid out + bond <= the same.
///      - The bond covers, at every close, what every day closing or in its
///        challenge window collected, that day included.
///      - The runtime code may be placed with `anvil_setCode` (devnet), so no
///        immutables; `initialize` sets everything once, and the constructor
///        runs it in a real deployment so nobody can initialize it first.
contract ConfidentialSettlementVault {
    using SafeERC20 for IERC20;

    // ---- constants ----

    uint256 public constant DAY = 1 days;
    /// @notice How long after its day ends a payment's receipt becomes
    ///         redeemable, if the day is not closed by then: the batch's turn.
    uint256 public constant REDEMPTION_DELAY = 1 days;
    /// @notice How long a debited withdrawal waits for finalization before
    ///         its merchant may cancel it.
    uint256 public constant FINALIZATION_TIMEOUT = 24 hours;

    bytes32 private constant EIP712_DOMAIN_TYPEHASH =
        keccak256("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)");
    bytes32 private constant NAME_HASH = keccak256("x402 Confidential Settlement");
    bytes32 private constant VERSION_HASH = keccak256("1");
    bytes32 public constant RECEIPT_TYPEHASH = keccak256(
        "Receipt(address payer,bytes32 nonce,address merchant,uint256 slot,uint64 amount,uint32 day)"
    );
    bytes32 public constant WITHDRAW_TYPEHASH =
        keccak256("Withdraw(uint256 slot,address to,uint64 amount,uint64 nonce,uint64 deadline)");

    /// @notice Payment states (`payment`'s `state`): 1 collected, 2 redeemed,
    ///         3 returned, 4 challenged.
    uint8 internal constant PAYMENT_COLLECTED = 1;
    uint8 internal constant PAYMENT_REDEEMED = 2;
    uint8 internal constant PAYMENT_RETURNED = 3;
    /// @notice Presented by its merchant in a challenge: its day's split was
    ///         checked against it, or it was paid from the bond.
    uint8 internal constant PAYMENT_CHALLENGED = 4;

    /// @notice Day phases (`dayInfo`'s `phase`), 0 to 3: open to payments, then to the batch's credits
    ///         (and to redemptions); closing while the KMS decrypts the
    ///         check; closed once the check was proven true (challengeable
    ///         for `challengeWindow`, then released); disputed once a
    ///         challenge proved a merchant's credit short (nothing of its
    ///         split is released; it reopens when the bond owner resumes).
    uint8 internal constant DAY_OPEN = 0;
    uint8 internal constant DAY_CLOSING = 1;
    uint8 internal constant DAY_CLOSED = 2;
    uint8 internal constant DAY_DISPUTED = 3;

    uint8 private constant CHALLENGE_OPEN = 1;
    uint8 private constant CHALLENGE_RESOLVED = 2;

    uint8 private constant WITHDRAWAL_DEBITED = 1;
    uint8 private constant WITHDRAWAL_FINALIZED = 2;
    uint8 private constant WITHDRAWAL_CANCELLED = 3;

    /// @dev `_creditedIn` value of a slot whose credit for the day was released.
    uint32 private constant RELEASED = type(uint32).max;

    // ---- types ----

    /// @notice Our EIP-712 receipt for one payment: the merchant's proof.
    struct Receipt {
        address payer;
        bytes32 nonce;
        address merchant;
        uint256 slot;
        uint64 amount;
        uint32 day;
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
        /// @dev Set by the first withdrawal or redemption, which name the
        ///      merchant anyway; from then on its wallet may decrypt its balance.
        address revealedOwner;
    }

    struct DayState {
        uint64 collected;
        uint64 redeemed;
        uint64 returned;
        uint32 payments;
        /// @dev Bumped when the KMS proves an attempt's credits wrong.
        uint32 attempt;
        uint32 slotsCredited;
        uint32 slotsReleased;
        uint8 phase;
        /// @dev Paid from the bond to challengers of this day (out of its pool).
        uint64 claimed;
        /// @dev When `finalizeDay` closed it: its challenge window starts.
        uint40 closedAt;
        uint32 openChallenges;
        /// @dev Its `collected` counts in `bondCommitted`.
        bool bondHeld;
        /// @dev The attempt's credits, summed in 128 bits: 2^32 slots of
        ///      at most 2^64 - 1 each cannot wrap it.
        euint128 creditedSum;
        ebool matches;
    }

    /// @dev One merchant's receipts of one day against its slot's credit.
    struct Challenge {
        uint256 slot;
        address merchant;
        uint32 day;
        uint8 state;
        bool short_;
        /// @dev What its receipts add up to (this challenge's own).
        uint64 amount;
        /// @dev Encrypted: the slot's credit < every receipt it presented for the day.
        ebool shortfall;
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

    bool private _initialized;
    IERC20 public asset;
    address public operator;
    address public receiptSigner;
    /// @notice The block `initialize` ran in: where reading this vault's logs may start.
    uint256 public deploymentBlock;

    uint256 public slotCount;
    mapping(uint256 => Slot) private _slots;
    /// @dev commitment => slot id + 1 (0: none), so assignment is idempotent.
    mapping(bytes32 => uint256) private _slotOfCommitment;
    /// @dev slot => day => attempt + 1 the slot was credited in (RELEASED once released).
    mapping(uint256 => mapping(uint256 => uint32)) private _creditedIn;
    /// @dev slot => day => the slot's credit of the day, pending until released.
    mapping(uint256 => mapping(uint256 => euint64)) private _pending;

    /// @dev receipt key (payer, nonce) => the payment the vault collected.
    mapping(bytes32 => Payment) private _payments;
    /// @dev day => index => receipt key; the day's `payments` counts them
    ///      (packed with its totals, so no lone counter word is written).
    mapping(uint256 => mapping(uint256 => bytes32)) private _dayPayments;
    mapping(uint256 => DayState) private _days;

    uint256 public totalCollected;
    uint256 public totalReturned;
    uint256 public totalCredited;
    uint256 public totalPaidOut;

    uint256 public withdrawalCount;
    mapping(uint256 => Withdrawal) private _withdrawals;
    /// @dev slot => withdrawal nonce => withdrawal id + 1, so a request is found without logs.
    mapping(uint256 => mapping(uint64 => uint256)) private _withdrawalOf;

    /// @notice Holds the operator bond: deposits it back, and alone lifts a
    ///         freeze (a cold key; the operator key cannot touch the bond).
    address public bondOwner;
    /// @notice Seconds between a day's close and the release of its credits.
    uint256 public challengeWindow;
    /// @notice USDC held against proven fraud, paid to shorted merchants.
    uint256 public bond;
    /// @notice What the days closing, or closed and not yet released, collected.
    uint256 public bondCommitted;
    /// @notice Set by a proven shortfall: no day closes until the bond owner resumes.
    bool public frozen;
    uint256 public totalClaimed;
    /// @dev Paid from the bond on disputed days, given back to it on resume.
    uint256 private _claimsToRestore;
    uint256[] private _disputedDays;
    uint256 public challengeCount;
    mapping(uint256 => Challenge) private _challenges;
    /// @dev slot => day => receipts its merchant presented and was not paid from the bond.
    mapping(uint256 => mapping(uint256 => uint256)) private _presented;
    /// @dev receipt key => slot + 1 whose merchant presented it.
    mapping(bytes32 => uint256) private _presentedBy;
    /// @dev slot => day => the part of `_presented` that another slot presented
    ///      first (a second receipt for one payment): the bond alone pays it.
    mapping(uint256 => mapping(uint256 => uint256)) private _presentedTwice;

    // ---- events ----

    event Initialized(address asset, address operator, address receiptSigner);
    event SlotAssigned(uint256 indexed slot, bytes32 commitment);
    event Collected(uint256 indexed day, bytes32 indexed receiptKey, address indexed payer, uint256 amount);
    event PaymentReturned(uint256 indexed day, bytes32 indexed receiptKey, address indexed payer, uint256 amount);
    event StrayReturned(address indexed to, uint256 amount);
    event SlotsCredited(uint256 indexed day, uint256 attempt, uint256 count);
    event DayClosing(uint256 indexed day, uint256 attempt, uint256 pool, bytes32 matches);
    event DayRejected(uint256 indexed day, uint256 attempt);
    event DayClosed(uint256 indexed day, uint256 pool, uint256 payments);
    event SlotsReleased(uint256 indexed day, uint256 count);
    event ReceiptRedeemed(bytes32 indexed receiptKey, uint256 indexed slot, uint256 amount);
    event WithdrawalRequested(
        uint256 indexed id, uint256 indexed slot, address indexed to, uint256 amount, uint256 nonce, bytes32 debited
    );
    event WithdrawalFinalized(uint256 indexed id, bool paid);
    event WithdrawalCancelled(uint256 indexed id);
    event BondDeposited(address indexed from, uint256 amount);
    event BondWithdrawn(address indexed to, uint256 amount);
    event ChallengeOpened(
        uint256 indexed id, uint256 indexed day, uint256 indexed slot, uint256 amount, bytes32 shortfall
    );
    event ChallengeResolved(uint256 indexed id, bool shortfall);
    event DayDisputed(uint256 indexed day, uint256 indexed challenge);
    event ClaimPaid(uint256 indexed day, uint256 indexed slot, address indexed merchant, uint256 amount);
    event Resumed(address operator, uint256 reopenedDays);

    // ---- errors ----

    error AlreadyInitialized();
    error NotOperator();
    error UnknownSlot(uint256 slot);
    error NotPaidToVault(address to);
    error BadAmount(uint256 amount);
    error AlreadyCollected(bytes32 receiptKey);
    error PaymentShort(uint256 received, uint256 expected);
    error DayNotOver(uint256 day);
    error DayNotOpen(uint256 day, uint8 phase);
    error DayNotClosing(uint256 day);
    error DayNotClosed(uint256 day);
    error DayIncomplete(uint256 day, uint256 credited, uint256 slots);
    error LengthMismatch();
    error PaymentNotCollected(bytes32 receiptKey);
    error ReceiptAlreadyRedeemed(bytes32 receiptKey);
    error PaymentWasReturned(bytes32 receiptKey);
    error ReceiptMismatch(bytes32 receiptKey);
    error RedemptionNotOpen(uint256 opensAt);
    error ReceiptCreditedByBatch(bytes32 receiptKey);
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
    error ReceiptNotForChallenge(bytes32 receiptKey);
    error ReceiptAlreadyPresented(bytes32 receiptKey);
    error ChallengeNotOpen(uint256 id);

    modifier onlyOperator() {
        if (msg.sender != operator) revert NotOperator();
        _;
    }

    // ---- setup ----

    /// @notice Deploys and initializes in one transaction, so no one can
    ///         initialize a fresh vault before its owner does. (The devnet
    ///         places the runtime code instead and calls `initialize`.)
    constructor(
        IERC20 asset_,
        address operator_,
        address receiptSigner_,
        address bondOwner_,
        uint256 challengeWindow_,
        CoprocessorConfig memory coprocessor
    ) {
        _initialize(asset_, operator_, receiptSigner_, bondOwner_, challengeWindow_, coprocessor);
    }

    /// @notice Sets the token, the operator (submits batches, pays gas; the
    ///         only account allowed to assign slots, credit and return
    ///         payments), the receipt signer, the bond owner, the challenge
    ///         window (seconds) and the chain's FHE coprocessor.
    ///         Once; a deployed vault already ran it in its constructor.
    function initialize(
        IERC20 asset_,
        address operator_,
        address receiptSigner_,
        address bondOwner_,
        uint256 challengeWindow_,
        CoprocessorConfig calldata coprocessor
    ) external {
        _initialize(asset_, operator_, receiptSigner_, bondOwner_, challengeWindow_, coprocessor);
    }

    function _initialize(
        IERC20 asset_,
        address operator_,
        address receiptSigner_,
        address bondOwner_,
        uint256 challengeWindow_,
        CoprocessorConfig memory coprocessor
    ) private {
        if (_initialized) revert AlreadyInitialized();
        _initialized = true;
        asset = asset_;
        operator = operator_;
        receiptSigner = receiptSigner_;
        bondOwner = bondOwner_;
        challengeWindow = challengeWindow_;
        deploymentBlock = block.number;
        FHE.setCoprocessor(coprocessor);
        emit Initialized(address(asset_), operator_, receiptSigner_);
    }

    // ---- enablement ----

    /// @notice Binds a new slot to `commitment`, or returns the slot it already has.
    ///         There is no way to change a slot's commitment afterwards.
    function assignSlot(bytes32 commitment) external onlyOperator returns (uint256 slot) {
        uint256 existing = _slotOfCommitment[commitment];
        if (existing != 0) return existing - 1;
        slot = slotCount++;
        _slots[slot].commitment = commitment;
        _slotOfCommitment[commitment] = slot + 1;
        emit SlotAssigned(slot, commitment);
    }

    // ---- payments ----

    /// @notice Collects a payer's EIP-3009 authorization to this vault (the
    ///         arguments of USDC's `transferWithAuthorization`, v/r/s form)
    ///         into today's pool. Anyone may submit it; a payment names no
    ///         merchant.
    function collect(
        address from,
        address to,
        uint256 value,
        uint256 validAfter,
        uint256 validBefore,
        bytes32 nonce,
        uint8 v,
        bytes32 r,
        bytes32 s
    ) external {
        uint256 before = _beforeCollect(from, to, value, nonce);
        IEIP3009(address(asset)).transferWithAuthorization(from, to, value, validAfter, validBefore, nonce, v, r, s);
        _afterCollect(from, value, nonce, before);
    }

    /// @notice `collect` with the signature as bytes (USDC's other form:
    ///         ERC-1271 wallets and 65-byte signatures alike).
    function collect(
        address from,
        address to,
        uint256 value,
        uint256 validAfter,
        uint256 validBefore,
        bytes32 nonce,
        bytes calldata signature
    ) external {
        uint256 before = _beforeCollect(from, to, value, nonce);
        IEIP3009(address(asset)).transferWithAuthorization(from, to, value, validAfter, validBefore, nonce, signature);
        _afterCollect(from, value, nonce, before);
    }

    /// @notice Sends an unattributed payment of an open day back to its payer
    ///         (one no merchant's settlement claims: submitted to `collect`
    ///         by someone else, or whose settlement failed). It leaves the
    ///         day's pool, so the day's credits must not count it.
    function returnPayments(uint256 day, bytes32[] calldata keys) external onlyOperator {
        DayState storage d = _days[day];
        if (d.phase != DAY_OPEN) revert DayNotOpen(day, d.phase);
        for (uint256 i = 0; i < keys.length; i++) {
            Payment storage p = _payments[keys[i]];
            if (p.state != PAYMENT_COLLECTED || p.day != day) continue;
            p.state = PAYMENT_RETURNED;
            d.returned += p.amount;
            totalReturned += p.amount;
            asset.safeTransfer(p.payer, p.amount);
            emit PaymentReturned(day, keys[i], p.payer, p.amount);
        }
    }

    /// @notice Sends back USDC that reached the vault outside `collect` (a
    ///         plain transfer, or an authorization executed on the token
    ///         directly): no payment record and no credit stands for it.
    function returnStray(address to, uint256 amount) external onlyOperator {
        uint256 stray = strayBalance();
        if (amount > stray) revert NotStray(amount, stray);
        asset.safeTransfer(to, amount);
        emit StrayReturned(to, amount);
    }

    // ---- the daily batch ----

    /// @notice Writes `day`'s encrypted credit of each slot into its pending
    ///         bucket (a day that has ended and is open). A slot already
    ///         credited in this attempt is skipped, so a retried chunk credits
    ///         nothing twice. Pending credit is not spendable.
    function creditSlots(
        uint256 day,
        uint256[] calldata slotIds,
        externalEuint64[] calldata amounts,
        bytes calldata inputProof
    ) external onlyOperator {
        if (slotIds.length != amounts.length) revert LengthMismatch();
        DayState storage d = _creditableDay(day);
        uint32 mark = d.attempt + 1;
        uint256 credited;
        euint128 sum = d.creditedSum;
        for (uint256 i = 0; i < slotIds.length; i++) {
            uint256 id = slotIds[i];
            if (id >= slotCount) revert UnknownSlot(id);
            if (_creditedIn[id][day] == mark) continue;
            _creditedIn[id][day] = mark;
            sum = _addPending(id, day, FHE.fromExternal(amounts[i], inputProof), sum);
            credited++;
        }
        if (credited > 0) {
            FHE.allowThis(sum);
            d.creditedSum = sum;
            d.slotsCredited += uint32(credited);
        }
        emit SlotsCredited(day, d.attempt, credited);
    }

    /// @notice Ends an attempt's crediting once every slot is credited, and
    ///         publishes, for the KMS to decrypt, whether the credits add up
    ///         to the day's pool (collected, less redeemed and returned).
    ///         Refused while frozen by a proven fraud, and while the bond is
    ///         below what this day and every day not yet released collected.
    function closeDay(uint256 day) external onlyOperator {
        if (frozen) revert OperatorFrozen();
        DayState storage d = _creditableDay(day);
        if (d.slotsCredited != slotCount) revert DayIncomplete(day, d.slotsCredited, slotCount);
        uint256 required = bondCommitted + d.collected;
        if (bond < required) revert BondTooLow(bond, required);
        bondCommitted = required;
        d.bondHeld = true;
        uint256 pool = dayPool(day);
        ebool matches = FHE.isInitialized(d.creditedSum)
            ? FHE.eq(d.creditedSum, uint128(pool))
            : FHE.asEbool(pool == 0);
        FHE.allowThis(matches);
        FHE.makePubliclyDecryptable(matches);
        d.matches = matches;
        d.phase = DAY_CLOSING;
        emit DayClosing(day, d.attempt, pool, ebool.unwrap(matches));
    }

    /// @notice Settles a closing day with the KMS decryption of its check.
    ///         True: the day is closed, its challenge window starts, and after
    ///         it its credits may be released. False: the credits are
    ///         discarded and the day reopens for a new attempt. Anyone may
    ///         submit the proof; not while frozen.
    function finalizeDay(uint256 day, bytes calldata cleartexts, bytes calldata decryptionProof) external {
        if (frozen) revert OperatorFrozen();
        DayState storage d = _days[day];
        if (d.phase != DAY_CLOSING) revert DayNotClosing(day);
        bytes32[] memory handles = new bytes32[](1);
        handles[0] = ebool.unwrap(d.matches);
        FHE.checkSignatures(handles, cleartexts, decryptionProof);
        if (abi.decode(cleartexts, (bool))) {
            d.phase = DAY_CLOSED;
            d.closedAt = uint40(block.timestamp);
            uint256 pool = dayPool(day);
            totalCredited += pool;
            _checkSolvent();
            emit DayClosed(day, pool, d.payments);
        } else {
            emit DayRejected(day, d.attempt);
            _reopen(d);
        }
    }

    /// @notice Moves a closed day's pending credit of each slot into its
    ///         balance, once per slot, once its challenge window is over and
    ///         no challenge of it is open. Anyone may call it.
    function release(uint256 day, uint256[] calldata slotIds) external {
        DayState storage d = _days[day];
        if (d.phase != DAY_CLOSED) revert DayNotClosed(day);
        uint256 endsAt = uint256(d.closedAt) + challengeWindow;
        if (block.timestamp < endsAt || d.openChallenges != 0) revert ChallengeWindowOpen(endsAt);
        if (d.bondHeld) {
            d.bondHeld = false;
            bondCommitted -= d.collected;
        }
        uint32 mark = d.attempt + 1;
        uint256 released;
        for (uint256 i = 0; i < slotIds.length; i++) {
            uint256 id = slotIds[i];
            if (_creditedIn[id][day] != mark) continue;
            _creditedIn[id][day] = RELEASED;
            Slot storage s = _slots[id];
            // Cannot wrap: every balance is part of what closed days and
            // redemptions credited, which the vault holds in USDC (< 2^64).
            _setBalance(s, FHE.add(s.balance, _pending[id][day]));
            _pending[id][day] = euint64.wrap(0);
            released++;
        }
        d.slotsReleased += uint32(released);
        emit SlotsReleased(day, released);
    }

    // ---- the operator bond ----

    /// @notice Adds to the operator bond (anyone; the USDC comes from the caller).
    function depositBond(uint256 amount) external {
        uint256 before = asset.balanceOf(address(this));
        asset.safeTransferFrom(msg.sender, address(this), amount);
        uint256 received = asset.balanceOf(address(this)) - before;
        bond += received;
        emit BondDeposited(msg.sender, received);
    }

    /// @notice The bond owner takes back bond that no day closing or in its
    ///         challenge window needs; never while frozen.
    function withdrawBond(address to, uint256 amount) external {
        if (msg.sender != bondOwner) revert NotBondOwner();
        if (frozen) revert OperatorFrozen();
        if (amount > bond || bond - amount < bondCommitted) revert BondTooLow(bond - amount, bondCommitted);
        bond -= amount;
        asset.safeTransfer(to, amount);
        emit BondWithdrawn(to, amount);
    }

    /// @notice After a proven fraud, the bond owner's answer: the operator
    ///         key becomes `newOperator` (rotate a key that stole), the bond
    ///         gets back from the disputed days' pools what it paid their
    ///         merchants, and each disputed day reopens for an honest split.
    function resume(address newOperator) external {
        if (msg.sender != bondOwner) revert NotBondOwner();
        if (!frozen) revert NotFrozen();
        frozen = false;
        operator = newOperator;
        bond += _claimsToRestore;
        totalClaimed += _claimsToRestore;
        _claimsToRestore = 0;
        uint256 n = _disputedDays.length;
        for (uint256 i = 0; i < n; i++) {
            // A disputed day was closed and never released: its bond share is held.
            DayState storage d = _days[_disputedDays[i]];
            d.bondHeld = false;
            bondCommitted -= d.collected;
            _reopen(d);
        }
        delete _disputedDays;
        emit Resumed(newOperator, n);
    }

    // ---- challenges: a receipt the operator must honour ----

    /// @notice A merchant's wallet presents its receipts of `day` against its
    ///         slot's credit for that day, during the day's challenge window
    ///         (or any time once the day is disputed). Each receipt must be
    ///         our signature for this merchant and slot, and match the vault's
    ///         record of a payment collected that day and never presented,
    ///         redeemed or returned. The vault then compares, encrypted, the
    ///         slot's credit with everything the merchant presented for the
    ///         day; `resolveChallenge` takes the KMS's answer. On a disputed
    ///         day there is nothing to compare: the receipts are paid at once.
    ///         Reveals on-chain: the merchant, its slot, and these payments.
    function challenge(
        uint256 day,
        uint256 slot,
        bytes32 salt,
        Receipt[] calldata receipts,
        bytes[] calldata signatures
    ) external returns (uint256 id) {
        if (receipts.length != signatures.length) revert LengthMismatch();
        if (slot >= slotCount) revert UnknownSlot(slot);
        Slot storage s = _slots[slot];
        if (keccak256(abi.encode(msg.sender, salt)) != s.commitment) revert NotSlotOwner();
        DayState storage d = _days[day];
        if (d.phase != DAY_DISPUTED && (d.phase != DAY_CLOSED || block.timestamp >= uint256(d.closedAt) + challengeWindow)) {
            revert NotChallengeable(day);
        }
        (uint256 amount, bool equivocated) = _presentAll(day, slot, receipts, signatures);
        s.revealedOwner = msg.sender;
        if (equivocated && d.phase == DAY_CLOSED) _dispute(d, day, challengeCount);
        return _openChallenge(d, day, slot, amount);
    }

    /// @dev Records a challenge of `amount` more receipts: compared under
    ///      encryption on a closed day, paid at once on a disputed one.
    function _openChallenge(DayState storage d, uint256 day, uint256 slot, uint256 amount)
        private
        returns (uint256 id)
    {
        uint256 presented = _presented[slot][day] + amount;
        _presented[slot][day] = presented;
        bool disputed = d.phase == DAY_DISPUTED;
        id = challengeCount++;
        Challenge storage c = _challenges[id];
        c.slot = slot;
        c.merchant = msg.sender;
        c.day = uint32(day);
        c.amount = uint64(amount);
        if (disputed) {
            c.state = CHALLENGE_RESOLVED;
            c.short_ = true;
            emit ChallengeOpened(id, day, slot, amount, bytes32(0));
            _payClaim(d, day, slot, msg.sender);
            return id;
        }
        euint64 credit = _creditedIn[slot][day] == d.attempt + 1 ? _pending[slot][day] : FHE.asEuint64(0);
        ebool shortfall = FHE.lt(credit, FHE.asEuint64(uint64(presented)));
        FHE.allowThis(shortfall);
        FHE.makePubliclyDecryptable(shortfall);
        c.state = CHALLENGE_OPEN;
        c.shortfall = shortfall;
        d.openChallenges += 1;
        emit ChallengeOpened(id, day, slot, amount, ebool.unwrap(shortfall));
    }

    /// @notice Settles a challenge with the KMS decryption of its comparison.
    ///         Anyone may submit it. Short: the day is disputed (nothing of
    ///         its split is released, the operator key is frozen) and the
    ///         merchant is paid, from the bond, every receipt it presented for
    ///         the day. Not short: nothing moves.
    function resolveChallenge(uint256 id, bytes calldata cleartexts, bytes calldata decryptionProof) external {
        Challenge storage c = _challenges[id];
        if (c.state != CHALLENGE_OPEN) revert ChallengeNotOpen(id);
        bytes32[] memory handles = new bytes32[](1);
        handles[0] = ebool.unwrap(c.shortfall);
        FHE.checkSignatures(handles, cleartexts, decryptionProof);
        bool shortfall = abi.decode(cleartexts, (bool));
        c.state = CHALLENGE_RESOLVED;
        c.short_ = shortfall;
        uint256 day = c.day;
        DayState storage d = _days[day];
        d.openChallenges -= 1;
        emit ChallengeResolved(id, shortfall);
        if (shortfall && d.phase == DAY_CLOSED) _dispute(d, day, id);
        if (d.phase == DAY_DISPUTED) _payClaim(d, day, c.slot, c.merchant);
    }

    /// @dev The split is proven wrong: none of it may be released, and the
    ///      key that made it may close nothing more.
    function _dispute(DayState storage d, uint256 day, uint256 challengeId) private {
        d.phase = DAY_DISPUTED;
        totalCredited -= dayPool(day);
        frozen = true;
        _disputedDays.push(day);
        emit DayDisputed(day, challengeId);
    }

    // ---- receipts without us ----

    /// @notice Credits a receipt's payment to its slot when its day was not
    ///         closed in time: at least `REDEMPTION_DELAY` after the day
    ///         ended, while it is open. The receipt must be our signature and
    ///         match the vault's own record of the payment (amount, day), and
    ///         the caller must know the slot's salt (the merchant, or us).
    ///         The payment leaves the day's pool, so no batch counts it again.
    function redeemReceipt(Receipt calldata r, bytes calldata signature, bytes32 salt) external {
        if (r.slot >= slotCount) revert UnknownSlot(r.slot);
        Slot storage s = _slots[r.slot];
        if (keccak256(abi.encode(r.merchant, salt)) != s.commitment) revert NotSlotOwner();
        if (ECDSA.recover(_typedDataHash(_receiptStructHash(r)), signature) != receiptSigner) {
            revert InvalidSignature();
        }
        bytes32 key = receiptKey(r.payer, r.nonce);
        Payment storage p = _payments[key];
        if (p.state == 0) revert PaymentNotCollected(key);
        if (p.state == PAYMENT_REDEEMED) revert ReceiptAlreadyRedeemed(key);
        if (p.state == PAYMENT_RETURNED) revert PaymentWasReturned(key);
        if (p.state == PAYMENT_CHALLENGED) revert ReceiptAlreadyPresented(key);
        if (p.amount != r.amount || p.day != r.day) revert ReceiptMismatch(key);
        DayState storage d = _days[p.day];
        if (d.phase == DAY_CLOSED) revert ReceiptCreditedByBatch(key);
        if (d.phase != DAY_OPEN) revert DayNotOpen(p.day, d.phase);
        uint256 opensAt = (uint256(p.day) + 1) * DAY + REDEMPTION_DELAY;
        if (block.timestamp < opensAt) revert RedemptionNotOpen(opensAt);
        p.state = PAYMENT_REDEEMED;
        d.redeemed += p.amount;
        totalCredited += p.amount;
        s.revealedOwner = r.merchant;
        _setBalance(s, FHE.add(s.balance, FHE.asEuint64(p.amount)));
        _checkSolvent();
        emit ReceiptRedeemed(key, r.slot, p.amount);
    }

    // ---- withdrawals ----

    /// @notice Debits a slot obliviously for a withdrawal its owner signed:
    ///         the amount when the balance covers it, nothing otherwise.
    ///         Anyone may submit it (the service does, and pays the gas).
    function requestWithdraw(WithdrawRequest calldata req, bytes32 salt, bytes calldata signature)
        external
        returns (uint256 id)
    {
        if (req.slot >= slotCount) revert UnknownSlot(req.slot);
        if (block.timestamp > req.deadline) revert RequestExpired();
        if (req.amount == 0) revert ZeroAmount();
        Slot storage s = _slots[req.slot];
        if (keccak256(abi.encode(req.to, salt)) != s.commitment) revert NotSlotOwner();
        if (req.nonce != s.withdrawNonce) revert WrongWithdrawNonce(s.withdrawNonce);
        if (!SignatureChecker.isValidSignatureNow(req.to, _typedDataHash(_withdrawStructHash(req)), signature)) {
            revert InvalidSignature();
        }
        s.withdrawNonce++;
        s.revealedOwner = req.to;

        (ebool debited, euint64 updated) = FHESafeMath.tryDecrease(s.balance, FHE.asEuint64(req.amount));
        _setBalance(s, updated);
        FHE.allowThis(debited);
        FHE.allow(debited, req.to);
        FHE.makePubliclyDecryptable(debited);

        id = withdrawalCount++;
        _withdrawals[id] = Withdrawal({
            slot: req.slot,
            to: req.to,
            amount: req.amount,
            requestedAt: uint64(block.timestamp),
            state: WITHDRAWAL_DEBITED,
            paid: false,
            debited: debited
        });
        _withdrawalOf[req.slot][req.nonce] = id + 1;
        emit WithdrawalRequested(id, req.slot, req.to, req.amount, req.nonce, ebool.unwrap(debited));
    }

    /// @notice Pays a debited withdrawal out, given the KMS decryption of its
    ///         outcome: the USDC goes to the slot's withdrawal address when
    ///         the debit happened; otherwise nothing moves.
    function finalizeWithdraw(uint256 id, bytes calldata cleartexts, bytes calldata decryptionProof) external {
        Withdrawal storage w = _withdrawal(id);
        if (w.state != WITHDRAWAL_DEBITED) revert NotDebited(id);
        bytes32[] memory handles = new bytes32[](1);
        handles[0] = ebool.unwrap(w.debited);
        FHE.checkSignatures(handles, cleartexts, decryptionProof);
        bool paid = abi.decode(cleartexts, (bool));
        w.state = WITHDRAWAL_FINALIZED;
        w.paid = paid;
        if (paid) {
            totalPaidOut += w.amount;
            asset.safeTransfer(w.to, w.amount);
        }
        emit WithdrawalFinalized(id, paid);
    }

    /// @notice Undoes the debit of a withdrawal left unfinalized for 24 hours.
    ///         Only its withdrawal address may call it.
    function cancelWithdraw(uint256 id) external {
        Withdrawal storage w = _withdrawal(id);
        if (w.state != WITHDRAWAL_DEBITED) revert NotDebited(id);
        if (msg.sender != w.to) revert NotWithdrawalOwner();
        uint256 cancellableAt = uint256(w.requestedAt) + FINALIZATION_TIMEOUT;
        if (block.timestamp < cancellableAt) revert TooEarlyToCancel(cancellableAt);
        w.state = WITHDRAWAL_CANCELLED;
        Slot storage s = _slots[w.slot];
        euint64 refund = FHE.select(w.debited, FHE.asEuint64(w.amount), FHE.asEuint64(0));
        _setBalance(s, FHE.add(s.balance, refund));
        emit WithdrawalCancelled(id);
    }

    // ---- reads ----

    function receiptKey(address payer, bytes32 nonce) public pure returns (bytes32) {
        return keccak256(abi.encode(payer, nonce));
    }

    /// @notice What the vault collected for a payment (state 0: nothing).
    function payment(bytes32 key) external view returns (address payer, uint64 amount, uint32 day, uint8 state) {
        Payment storage p = _payments[key];
        return (p.payer, p.amount, p.day, p.state);
    }

    /// @notice The payments collected on `day`, `limit` from `offset`.
    function dayPayments(uint256 day, uint256 offset, uint256 limit)
        external
        view
        returns (bytes32[] memory keys, address[] memory payers, uint64[] memory amounts, uint8[] memory states)
    {
        uint256 total = _days[day].payments;
        uint256 end = offset + limit > total ? total : offset + limit;
        uint256 n = end > offset ? end - offset : 0;
        keys = new bytes32[](n);
        payers = new address[](n);
        amounts = new uint64[](n);
        states = new uint8[](n);
        for (uint256 i = 0; i < n; i++) {
            bytes32 key = _dayPayments[day][offset + i];
            Payment storage p = _payments[key];
            keys[i] = key;
            payers[i] = p.payer;
            amounts[i] = p.amount;
            states[i] = p.state;
        }
    }

    /// @return slot the challenged slot
    /// @return merchant who presented the receipts
    /// @return day the day challenged
    /// @return amount what its own receipts add up to
    /// @return resolved whether the KMS's answer is in (or it was paid at once)
    /// @return shortfall the answer: the slot's credit fell short
    /// @return handle the encrypted comparison, publicly decryptable
    function challengeInfo(uint256 id)
        external
        view
        returns (
            uint256 slot,
            address merchant,
            uint32 day,
            uint64 amount,
            bool resolved,
            bool shortfall,
            bytes32 handle
        )
    {
        Challenge storage c = _challenges[id];
        return (
            c.slot,
            c.merchant,
            c.day,
            c.amount,
            c.state == CHALLENGE_RESOLVED,
            c.short_,
            ebool.unwrap(c.shortfall)
        );
    }

    /// @notice A slot's credit of `day` in its current attempt, until released (0: none).
    function slotDayCredit(uint256 slot, uint256 day) external view returns (bytes32) {
        return _creditedIn[slot][day] == _days[day].attempt + 1 ? euint64.unwrap(_pending[slot][day]) : bytes32(0);
    }

    /// @return closedAt when the day closed (0: not closed); its window ends `challengeWindow` later
    /// @return openChallenges challenges awaiting the KMS's answer
    /// @return claimed what its merchants were paid from the bond out of its pool
    function dayChallenges(uint256 day)
        external
        view
        returns (uint256 closedAt, uint256 openChallenges, uint256 claimed)
    {
        DayState storage d = _days[day];
        return (d.closedAt, d.openChallenges, d.claimed);
    }

    /// @notice What the day's credits must add up to: collected, less redeemed and returned.
    function dayPool(uint256 day) public view returns (uint256) {
        DayState storage d = _days[day];
        return uint256(d.collected) - d.redeemed - d.returned - d.claimed;
    }

    function dayInfo(uint256 day)
        external
        view
        returns (
            uint64 collected,
            uint32 payments,
            uint64 redeemed,
            uint64 returned,
            uint32 attempt,
            uint32 slotsCredited,
            uint32 slotsReleased,
            uint8 phase,
            bytes32 matches
        )
    {
        DayState storage d = _days[day];
        return (
            d.collected,
            d.payments,
            d.redeemed,
            d.returned,
            d.attempt,
            d.slotsCredited,
            d.slotsReleased,
            d.phase,
            ebool.unwrap(d.matches)
        );
    }

    /// @return credited whether the slot is credited for `day` in the current attempt
    /// @return released whether its credit of `day` is in its balance
    function slotDay(uint256 slot, uint256 day) external view returns (bool credited, bool released) {
        uint32 mark = _creditedIn[slot][day];
        return (mark == RELEASED || mark == _days[day].attempt + 1, mark == RELEASED);
    }

    function slotOf(bytes32 commitment) external view returns (bool assigned, uint256 slot) {
        uint256 v = _slotOfCommitment[commitment];
        return (v != 0, v == 0 ? 0 : v - 1);
    }

    function slotInfo(uint256 slot)
        external
        view
        returns (bytes32 commitment, bytes32 balance, uint64 withdrawNonce, address revealedOwner)
    {
        if (slot >= slotCount) revert UnknownSlot(slot);
        Slot storage s = _slots[slot];
        return (s.commitment, euint64.unwrap(s.balance), s.withdrawNonce, s.revealedOwner);
    }

    function withdrawal(uint256 id)
        external
        view
        returns (
            uint256 slot,
            address to,
            uint64 amount,
            uint64 requestedAt,
            uint8 state,
            bool paid,
            bytes32 debited
        )
    {
        Withdrawal storage w = _withdrawal(id);
        return (w.slot, w.to, w.amount, w.requestedAt, w.state, w.paid, ebool.unwrap(w.debited));
    }

    /// @notice The withdrawal that used a slot's withdrawal nonce, if any.
    function withdrawalOf(uint256 slot, uint64 nonce) external view returns (bool found, uint256 id) {
        uint256 v = _withdrawalOf[slot][nonce];
        return (v != 0, v == 0 ? 0 : v - 1);
    }

    /// @notice USDC the vault holds beyond what it owes: what reached it
    ///         outside `collect`.
    function strayBalance() public view returns (uint256) {
        uint256 owed = totalCollected - totalReturned - totalClaimed - totalPaidOut + bond;
        uint256 holdings = asset.balanceOf(address(this));
        return holdings > owed ? holdings - owed : 0;
    }

    function domainSeparator() public view returns (bytes32) {
        return keccak256(abi.encode(EIP712_DOMAIN_TYPEHASH, NAME_HASH, VERSION_HASH, block.chainid, address(this)));
    }

    // ---- internals ----

    function _beforeCollect(address from, address to, uint256 value, bytes32 nonce)
        private
        view
        returns (uint256 balanceBefore)
    {
        if (to != address(this)) revert NotPaidToVault(to);
        if (value == 0 || value > type(uint64).max) revert BadAmount(value);
        bytes32 key = receiptKey(from, nonce);
        if (_payments[key].state != 0) revert AlreadyCollected(key);
        return asset.balanceOf(address(this));
    }

    /// @dev After the token call: the vault must hold exactly `value` more
    ///      (a token that took a fee, or paid elsewhere, is refused).
    ///      Only the configured USDC is called, which makes no callbacks.
    function _afterCollect(address from, uint256 value, bytes32 nonce, uint256 balanceBefore) private {
        uint256 received = asset.balanceOf(address(this)) - balanceBefore;
        if (received != value) revert PaymentShort(received, value);
        bytes32 key = receiptKey(from, nonce);
        uint256 day = block.timestamp / DAY;
        _payments[key] = Payment({payer: from, amount: uint64(value), day: uint24(day), state: PAYMENT_COLLECTED});
        DayState storage d = _days[day];
        _dayPayments[day][d.payments] = key;
        d.collected += uint64(value);
        d.payments += 1;
        totalCollected += value;
        emit Collected(day, key, from, value);
    }

    function _presentAll(uint256 day, uint256 slot, Receipt[] calldata receipts, bytes[] calldata signatures)
        private
        returns (uint256 amount, bool equivocated)
    {
        for (uint256 i = 0; i < receipts.length; i++) {
            (uint256 a, bool twice) = _presentReceipt(receipts[i], signatures[i], day, slot);
            amount += a;
            equivocated = equivocated || twice;
        }
    }

    /// @dev Checks one receipt of a challenge and marks its payment presented.
    ///      A payment another slot's merchant presented before, with a
    ///      receipt of ours too, proves the receipt signer signed two receipts
    ///      for one payment (`twice`): the receipt counts, and its day is
    ///      disputed, so the bond pays both merchants.
    function _presentReceipt(Receipt calldata r, bytes calldata signature, uint256 day, uint256 slot)
        private
        returns (uint256, bool twice)
    {
        bytes32 key = receiptKey(r.payer, r.nonce);
        if (r.merchant != msg.sender || r.slot != slot || r.day != day) revert ReceiptNotForChallenge(key);
        if (ECDSA.recover(_typedDataHash(_receiptStructHash(r)), signature) != receiptSigner) {
            revert InvalidSignature();
        }
        Payment storage p = _payments[key];
        if (p.state == 0) revert PaymentNotCollected(key);
        if (p.state == PAYMENT_CHALLENGED) {
            uint256 by = _presentedBy[key];
            // Presented by this slot already, or by two slots already.
            if (by == slot + 1 || by == 0 || by == type(uint256).max) revert ReceiptAlreadyPresented(key);
            twice = true;
        }
        if (p.state == PAYMENT_REDEEMED) revert ReceiptAlreadyRedeemed(key);
        if (p.state == PAYMENT_RETURNED) revert PaymentWasReturned(key);
        if (p.amount != r.amount || p.day != day) revert ReceiptMismatch(key);
        p.state = PAYMENT_CHALLENGED;
        _presentedBy[key] = twice ? type(uint256).max : slot + 1;
        if (twice) _presentedTwice[slot][day] += p.amount;
        return (p.amount, twice);
    }

    /// @dev Pays a merchant of a disputed day, from the bond, every receipt
    ///      it presented for the day and was not yet paid; those payments
    ///      leave the day's pool (the bond gets them back on resume).
    function _payClaim(DayState storage d, uint256 day, uint256 slot, address merchant) private {
        uint256 amount = _presented[slot][day];
        if (amount == 0) return;
        if (amount > bond) revert BondTooLow(bond, amount);
        // What a second receipt for one payment claims is in no pool: the
        // bond pays it and does not get it back.
        uint256 fromPool = amount - _presentedTwice[slot][day];
        _presented[slot][day] = 0;
        _presentedTwice[slot][day] = 0;
        bond -= amount;
        d.claimed += uint64(fromPool);
        _claimsToRestore += fromPool;
        asset.safeTransfer(merchant, amount);
        emit ClaimPaid(day, slot, merchant, amount);
    }

    /// @dev Discards a day's credits for a new attempt.
    function _reopen(DayState storage d) private {
        d.phase = DAY_OPEN;
        d.attempt += 1;
        d.slotsCredited = 0;
        d.closedAt = 0;
        d.creditedSum = euint128.wrap(0);
        d.matches = ebool.wrap(0);
    }

    /// @dev Keeps a slot's credit of the day pending and adds it to the
    ///      attempt's 128-bit sum.
    ///      The operator may decrypt it, so the merchant's dashboard can
    ///      compare it with the day's receipts during the challenge window.
    function _addPending(uint256 id, uint256 day, euint64 amount, euint128 sum) private returns (euint128) {
        FHE.allowThis(amount);
        FHE.allow(amount, operator);
        _pending[id][day] = amount;
        euint128 wide = FHE.asEuint128(amount);
        return FHE.isInitialized(sum) ? FHE.add(sum, wide) : wide;
    }

    /// @dev A day is credited once it has ended (no payment can join its
    ///      pool any more) and until it closes; no upper bound, so a day
    ///      whose batch did not run is closed late.
    function _creditableDay(uint256 day) private view returns (DayState storage d) {
        if (block.timestamp < (day + 1) * DAY) revert DayNotOver(day);
        d = _days[day];
        if (d.phase != DAY_OPEN) revert DayNotOpen(day, d.phase);
    }

    /// @dev Every new balance handle: the vault keeps using it, the operator
    ///      may decrypt it (the service's dashboard), and so may the merchant
    ///      once a withdrawal or redemption has named it.
    function _setBalance(Slot storage s, euint64 balance) private {
        s.balance = balance;
        FHE.allowThis(balance);
        FHE.allow(balance, operator);
        if (s.revealedOwner != address(0)) FHE.allow(balance, s.revealedOwner);
    }

    function _checkSolvent() private view {
        uint256 owed = totalCredited - totalPaidOut + bond;
        uint256 holdings = asset.balanceOf(address(this));
        if (owed > holdings) revert Insolvent(owed, holdings);
    }

    function _withdrawal(uint256 id) private view returns (Withdrawal storage w) {
        if (id >= withdrawalCount) revert UnknownWithdrawal(id);
        w = _withdrawals[id];
    }

    function _receiptStructHash(Receipt calldata r) private pure returns (bytes32) {
        return keccak256(abi.encode(RECEIPT_TYPEHASH, r.payer, r.nonce, r.merchant, r.slot, r.amount, r.day));
    }

    function _withdrawStructHash(WithdrawRequest calldata w) private pure returns (bytes32) {
        return keccak256(abi.encode(WITHDRAW_TYPEHASH, w.slot, w.to, w.amount, w.nonce, w.deadline));
    }

    function _typedDataHash(bytes32 structHash) private view returns (bytes32) {
        return MessageHashUtils.toTypedDataHash(domainSeparator(), structHash);
    }
}
