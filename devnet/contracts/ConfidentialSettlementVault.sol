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
///         publishes `sum == what the day collected` for the KMS to decrypt;
///         `finalizeDay` (anyone, with the KMS proof) either accepts the day
///         or, when the credits do not add up, throws them away for a new
///         attempt; `release` (anyone) then moves each slot's accepted
///         credit into its balance.
///      3. A merchant whose day is not closed a day after it ended redeems
///         its receipts (our signature over one payment) against the
///         vault's own record of that payment: same amount, same day, once.
///      4. Withdrawals debit obliviously (the amount, or nothing when the
///         balance is short); the KMS-signed outcome releases the USDC; after
///         24 hours unfinalized the merchant may cancel and the debit is undone.
///      What the operator key can still do: assign slots, choose how a day's
///      collected total is split between slots (the split must add up, so at
///      worst it misattributes within one day's pool, which merchants see
///      against their receipts), return an unattributed payment to its own
///      payer, and send back USDC that reached the vault outside `collect`.
///      It cannot mint, wrap a credit around, spend pending credit, or move
///      a merchant's balance.
///
///      Invariants:
///      - A slot is bound to `keccak256(abi.encode(merchant, salt))` when
///        assigned and never rebound. No merchant address is stored or logged
///        until that merchant withdraws or redeems (which name it, as they must).
///      - Every collected payment is in exactly one of: its day's pool (until
///        the day closes, then in slot balances), a redemption, or returned.
///      - collected - returned - paid out <= the vault's USDC; credited (closed
///        days and redemptions) - paid out <= the same.
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

    /// @notice Payment states.
    uint8 public constant PAYMENT_COLLECTED = 1;
    uint8 public constant PAYMENT_REDEEMED = 2;
    uint8 public constant PAYMENT_RETURNED = 3;

    /// @notice Day phases: open to payments, then to the batch's credits
    ///         (and to redemptions); closing while the KMS decrypts the
    ///         check; closed once the check was proven true.
    uint8 public constant DAY_OPEN = 0;
    uint8 public constant DAY_CLOSING = 1;
    uint8 public constant DAY_CLOSED = 2;

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
        /// @dev The attempt's credits, summed in 128 bits: 2^32 slots of
        ///      at most 2^64 - 1 each cannot wrap it.
        euint128 creditedSum;
        ebool matches;
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

    modifier onlyOperator() {
        if (msg.sender != operator) revert NotOperator();
        _;
    }

    // ---- setup ----

    /// @notice Deploys and initializes in one transaction, so no one can
    ///         initialize a fresh vault before its owner does. (The devnet
    ///         places the runtime code instead and calls `initialize`.)
    constructor(IERC20 asset_, address operator_, address receiptSigner_, CoprocessorConfig memory coprocessor) {
        _initialize(asset_, operator_, receiptSigner_, coprocessor);
    }

    /// @notice Sets the token, the operator (submits batches, pays gas; the
    ///         only account allowed to assign slots, credit and return
    ///         payments), the receipt signer and the chain's FHE coprocessor.
    ///         Once; a deployed vault already ran it in its constructor.
    function initialize(
        IERC20 asset_,
        address operator_,
        address receiptSigner_,
        CoprocessorConfig calldata coprocessor
    ) external {
        _initialize(asset_, operator_, receiptSigner_, coprocessor);
    }

    function _initialize(
        IERC20 asset_,
        address operator_,
        address receiptSigner_,
        CoprocessorConfig memory coprocessor
    ) private {
        if (_initialized) revert AlreadyInitialized();
        _initialized = true;
        asset = asset_;
        operator = operator_;
        receiptSigner = receiptSigner_;
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
    function closeDay(uint256 day) external onlyOperator {
        DayState storage d = _creditableDay(day);
        if (d.slotsCredited != slotCount) revert DayIncomplete(day, d.slotsCredited, slotCount);
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
    ///         True: the day is closed and its credits may be released.
    ///         False: the credits are discarded and the day reopens for a new
    ///         attempt. Anyone may submit the proof.
    function finalizeDay(uint256 day, bytes calldata cleartexts, bytes calldata decryptionProof) external {
        DayState storage d = _days[day];
        if (d.phase != DAY_CLOSING) revert DayNotClosing(day);
        bytes32[] memory handles = new bytes32[](1);
        handles[0] = ebool.unwrap(d.matches);
        FHE.checkSignatures(handles, cleartexts, decryptionProof);
        if (abi.decode(cleartexts, (bool))) {
            d.phase = DAY_CLOSED;
            uint256 pool = dayPool(day);
            totalCredited += pool;
            _checkSolvent();
            emit DayClosed(day, pool, d.payments);
        } else {
            emit DayRejected(day, d.attempt);
            d.phase = DAY_OPEN;
            d.attempt += 1;
            d.slotsCredited = 0;
            d.creditedSum = euint128.wrap(0);
            d.matches = ebool.wrap(0);
        }
    }

    /// @notice Moves a closed day's pending credit of each slot into its
    ///         balance, once per slot. Anyone may call it.
    function release(uint256 day, uint256[] calldata slotIds) external {
        DayState storage d = _days[day];
        if (d.phase != DAY_CLOSED) revert DayNotClosed(day);
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

    /// @notice What the day's credits must add up to: collected, less redeemed and returned.
    function dayPool(uint256 day) public view returns (uint256) {
        DayState storage d = _days[day];
        return uint256(d.collected) - d.redeemed - d.returned;
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
        uint256 owed = totalCollected - totalReturned - totalPaidOut;
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

    /// @dev Keeps a slot's credit of the day pending and adds it to the
    ///      attempt's 128-bit sum.
    function _addPending(uint256 id, uint256 day, euint64 amount, euint128 sum) private returns (euint128) {
        FHE.allowThis(amount);
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
        uint256 owed = totalCredited - totalPaidOut;
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
