// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {FHE, ebool, euint64, externalEuint64} from "@fhevm/solidity/lib/FHE.sol";
import {CoprocessorConfig} from "@fhevm/solidity/lib/Impl.sol";
import {FHESafeMath} from "@openzeppelin/confidential-contracts/utils/FHESafeMath.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {ECDSA} from "@openzeppelin/contracts/utils/cryptography/ECDSA.sol";
import {MessageHashUtils} from "@openzeppelin/contracts/utils/cryptography/MessageHashUtils.sol";
import {SignatureChecker} from "@openzeppelin/contracts/utils/cryptography/SignatureChecker.sol";

/// @dev What the vault needs of USDC beyond ERC-20: whether an EIP-3009
///      authorization was used, so a receipt can only stand for a payment
///      that really happened.
interface IEIP3009State {
    function authorizationState(address authorizer, bytes32 nonce) external view returns (bool);
}

/// @title ConfidentialSettlementVault
/// @notice Holds the USDC of confidential x402 payments and one encrypted
///         balance per merchant slot. Payers pay the vault with an ordinary
///         USDC `transferWithAuthorization`; which merchant a payment is for is
///         known only to the operator, which credits every slot once a day
///         with an encrypted amount (zero included), so neither who earned nor
///         how often shows on-chain.
/// @dev Invariants:
///      - A slot is bound to a commitment `keccak256(abi.encode(merchant, salt))`
///        when assigned; nothing can change it afterwards, so the withdrawal
///        address is permanent. No merchant address is stored or logged until
///        that merchant withdraws (the withdrawal names it, as it must).
///      - A slot is credited at most once per day, and only during the day
///        after (`creditSlots` skips a slot already credited, so a retried
///        chunk credits nothing twice). A day is closed once every slot is
///        credited; its plaintext total is the sum of the receipts marked for
///        it, and an encrypted "the slot credits add up to that total" flag is
///        made publicly decryptable for auditors.
///      - A receipt (our EIP-712 signature over one payment) is credited once:
///        either marked by its day's batch or redeemed by anyone after that
///        day's batch window, never both.
///      - Liabilities (credited minus paid out) never exceed the vault's USDC.
///      - A withdrawal debits obliviously (the amount, or nothing when the
///        balance is short); the KMS-signed decryption of the outcome
///        releases the USDC; after 24 hours unfinalized the merchant can
///        cancel it and the debit is undone.
///      - The runtime code may be placed with `anvil_setCode` (devnet), so no
///        immutables: `initialize` sets everything once, and the EIP-712
///        domain is computed on each use.
contract ConfidentialSettlementVault {
    using SafeERC20 for IERC20;

    // ---- constants ----

    uint256 public constant DAY = 1 days;
    /// @notice How long after its day ends a day's batch may run; receipts of
    ///         the day become redeemable when it closes.
    uint256 public constant BATCH_WINDOW = 1 days;
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

    uint8 private constant WITHDRAWAL_DEBITED = 1;
    uint8 private constant WITHDRAWAL_FINALIZED = 2;
    uint8 private constant WITHDRAWAL_CANCELLED = 3;

    // ---- types ----

    struct Receipt {
        address payer;
        bytes32 nonce;
        address merchant;
        uint256 slot;
        uint64 amount;
        uint32 day;
    }

    /// @notice A payment as a batch marks it: no merchant, no slot.
    struct ReceiptRef {
        address payer;
        bytes32 nonce;
        uint64 amount;
    }

    struct WithdrawRequest {
        uint256 slot;
        address to;
        uint64 amount;
        uint64 nonce;
        uint64 deadline;
    }

    struct Slot {
        bytes32 commitment;
        euint64 balance;
        uint64 withdrawNonce;
        /// @dev Set by the first withdrawal, which names the merchant anyway;
        ///      from then on the merchant's wallet may decrypt its balance.
        address revealedOwner;
    }

    struct DayState {
        uint64 receiptTotal;
        uint32 receiptCount;
        uint32 slotsCredited;
        bool closed;
        euint64 creditedSum;
        ebool matchesReceipts;
    }

    struct Withdrawal {
        uint256 slot;
        address to;
        uint64 amount;
        uint64 requestedAt;
        uint8 state;
        ebool debited;
    }

    // ---- storage ----

    bool private _initialized;
    IERC20 public asset;
    address public operator;
    address public receiptSigner;

    uint256 public slotCount;
    mapping(uint256 => Slot) private _slots;
    /// @dev commitment => slot id + 1 (0: none), so assignment is idempotent.
    mapping(bytes32 => uint256) private _slotOfCommitment;
    mapping(uint256 => mapping(uint256 => bool)) private _creditedOn;

    mapping(uint256 => DayState) private _days;
    /// @dev receipt key => day + 1 of the batch that marked it.
    mapping(bytes32 => uint256) private _markedOn;
    mapping(bytes32 => bool) private _redeemed;

    uint256 public totalCredited;
    uint256 public totalPaidOut;

    uint256 public withdrawalCount;
    mapping(uint256 => Withdrawal) private _withdrawals;

    // ---- events ----

    event Initialized(address asset, address operator, address receiptSigner);
    event SlotAssigned(uint256 indexed slot, bytes32 commitment);
    event ReceiptsMarked(uint256 indexed day, uint256 count, uint256 amount);
    event SlotsCredited(uint256 indexed day, uint256 count);
    event DayClosed(uint256 indexed day, uint256 receiptTotal, uint256 receiptCount, bytes32 matchesReceipts);
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
    error BatchWindowClosed(uint256 day);
    error DayAlreadyClosed(uint256 day);
    error DayIncomplete(uint256 day, uint256 credited, uint256 slots);
    error LengthMismatch();
    error ReceiptAlreadyMarked(bytes32 receiptKey);
    error ReceiptAlreadyRedeemed(bytes32 receiptKey);
    error PaymentNotMade(bytes32 receiptKey);
    error RedemptionNotOpen(uint256 opensAt);
    error ReceiptCreditedByBatch(bytes32 receiptKey);
    error InvalidSignature();
    error Insolvent(uint256 liabilities, uint256 holdings);
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

    /// @notice Sets the token, the operator (submits batches, pays gas; the
    ///         only account allowed to assign slots, mark receipts and credit),
    ///         the receipt signer and the FHE coprocessor of the chain. Once.
    function initialize(
        IERC20 asset_,
        address operator_,
        address receiptSigner_,
        CoprocessorConfig calldata coprocessor
    ) external {
        if (_initialized) revert AlreadyInitialized();
        _initialized = true;
        asset = asset_;
        operator = operator_;
        receiptSigner = receiptSigner_;
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

    // ---- the daily batch ----

    /// @notice Marks the receipts a day's batch credits (idempotent per receipt).
    ///         The refs name payments, not merchants.
    function markReceipts(uint256 day, ReceiptRef[] calldata refs) external onlyOperator {
        DayState storage d = _openDay(day);
        uint256 added;
        uint256 count;
        for (uint256 i = 0; i < refs.length; i++) {
            bytes32 key = receiptKey(refs[i].payer, refs[i].nonce);
            uint256 marked = _markedOn[key];
            if (marked == day + 1) continue;
            if (marked != 0) revert ReceiptAlreadyMarked(key);
            if (_redeemed[key]) revert ReceiptAlreadyRedeemed(key);
            if (!IEIP3009State(address(asset)).authorizationState(refs[i].payer, refs[i].nonce)) {
                revert PaymentNotMade(key);
            }
            _markedOn[key] = day + 1;
            added += refs[i].amount;
            count++;
        }
        d.receiptTotal += uint64(added);
        d.receiptCount += uint32(count);
        emit ReceiptsMarked(day, count, added);
    }

    /// @notice Credits `day` to each slot with an encrypted amount. A slot
    ///         already credited for the day is skipped, so a retried chunk
    ///         never credits twice.
    function creditSlots(
        uint256 day,
        uint256[] calldata slotIds,
        externalEuint64[] calldata amounts,
        bytes calldata inputProof
    ) external onlyOperator {
        if (slotIds.length != amounts.length) revert LengthMismatch();
        DayState storage d = _openDay(day);
        uint256 credited;
        euint64 sum = d.creditedSum;
        for (uint256 i = 0; i < slotIds.length; i++) {
            uint256 id = slotIds[i];
            if (id >= slotCount) revert UnknownSlot(id);
            if (_creditedOn[id][day]) continue;
            _creditedOn[id][day] = true;
            euint64 amount = FHE.fromExternal(amounts[i], inputProof);
            Slot storage s = _slots[id];
            _setBalance(s, FHE.add(s.balance, amount));
            sum = FHE.isInitialized(sum) ? FHE.add(sum, amount) : amount;
            credited++;
        }
        if (credited > 0) {
            FHE.allowThis(sum);
            d.creditedSum = sum;
            d.slotsCredited += uint32(credited);
        }
        emit SlotsCredited(day, credited);
    }

    /// @notice Ends a day's batch once every slot is credited: books its
    ///         receipt total, checks solvency, and publishes an encrypted
    ///         flag saying whether the slot credits add up to that total.
    function closeDay(uint256 day) external onlyOperator {
        DayState storage d = _openDay(day);
        if (d.slotsCredited != slotCount) revert DayIncomplete(day, d.slotsCredited, slotCount);
        d.closed = true;
        ebool matches = FHE.isInitialized(d.creditedSum)
            ? FHE.eq(d.creditedSum, FHE.asEuint64(d.receiptTotal))
            : FHE.asEbool(d.receiptTotal == 0);
        FHE.allowThis(matches);
        FHE.makePubliclyDecryptable(matches);
        d.matchesReceipts = matches;
        totalCredited += d.receiptTotal;
        _checkSolvent();
        emit DayClosed(day, d.receiptTotal, d.receiptCount, ebool.unwrap(matches));
    }

    // ---- receipts without us ----

    /// @notice Credits a receipt whose payment its day's batch did not credit.
    ///         Anyone may submit it once the day's batch window has passed.
    function redeemReceipt(Receipt calldata r, bytes calldata signature) external {
        if (r.slot >= slotCount) revert UnknownSlot(r.slot);
        uint256 opensAt = (uint256(r.day) + 1) * DAY + BATCH_WINDOW;
        if (block.timestamp < opensAt) revert RedemptionNotOpen(opensAt);
        if (ECDSA.recover(_typedDataHash(_receiptStructHash(r)), signature) != receiptSigner) {
            revert InvalidSignature();
        }
        bytes32 key = receiptKey(r.payer, r.nonce);
        if (_redeemed[key]) revert ReceiptAlreadyRedeemed(key);
        uint256 marked = _markedOn[key];
        // A mark counts once its day closed, or once its slot was credited
        // that day; a batch that stopped before either leaves it redeemable.
        if (marked != 0 && (_days[marked - 1].closed || _creditedOn[r.slot][marked - 1])) {
            revert ReceiptCreditedByBatch(key);
        }
        if (!IEIP3009State(address(asset)).authorizationState(r.payer, r.nonce)) {
            revert PaymentNotMade(key);
        }
        _redeemed[key] = true;
        Slot storage s = _slots[r.slot];
        _setBalance(s, FHE.add(s.balance, FHE.asEuint64(r.amount)));
        totalCredited += r.amount;
        _checkSolvent();
        emit ReceiptRedeemed(key, r.slot, r.amount);
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
            debited: debited
        });
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

    function creditedOn(uint256 slot, uint256 day) external view returns (bool) {
        return _creditedOn[slot][day];
    }

    function dayInfo(uint256 day)
        external
        view
        returns (uint64 receiptTotal, uint32 receiptCount, uint32 slotsCredited, bool closed, bytes32 matchesReceipts)
    {
        DayState storage d = _days[day];
        return (d.receiptTotal, d.receiptCount, d.slotsCredited, d.closed, ebool.unwrap(d.matchesReceipts));
    }

    /// @return markedDay the day + 1 of the batch that marked it (0: none)
    function receiptInfo(bytes32 key) external view returns (uint256 markedDay, bool redeemed) {
        return (_markedOn[key], _redeemed[key]);
    }

    function withdrawal(uint256 id)
        external
        view
        returns (uint256 slot, address to, uint64 amount, uint64 requestedAt, uint8 state, bytes32 debited)
    {
        Withdrawal storage w = _withdrawal(id);
        return (w.slot, w.to, w.amount, w.requestedAt, w.state, ebool.unwrap(w.debited));
    }

    function domainSeparator() public view returns (bytes32) {
        return keccak256(abi.encode(EIP712_DOMAIN_TYPEHASH, NAME_HASH, VERSION_HASH, block.chainid, address(this)));
    }

    // ---- internals ----

    /// @dev A day's batch runs during the day after it, and only until closed.
    function _openDay(uint256 day) private view returns (DayState storage d) {
        uint256 start = (day + 1) * DAY;
        if (block.timestamp < start || block.timestamp >= start + BATCH_WINDOW) revert BatchWindowClosed(day);
        d = _days[day];
        if (d.closed) revert DayAlreadyClosed(day);
    }

    /// @dev Every new balance handle: the vault keeps using it, the operator
    ///      may decrypt it (the service's dashboard), and so may the merchant
    ///      once a withdrawal has named it.
    function _setBalance(Slot storage s, euint64 balance) private {
        s.balance = balance;
        FHE.allowThis(balance);
        FHE.allow(balance, operator);
        if (s.revealedOwner != address(0)) FHE.allow(balance, s.revealedOwner);
    }

    function _checkSolvent() private view {
        uint256 liabilities = totalCredited - totalPaidOut;
        uint256 holdings = asset.balanceOf(address(this));
        if (liabilities > holdings) revert Insolvent(liabilities, holdings);
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
