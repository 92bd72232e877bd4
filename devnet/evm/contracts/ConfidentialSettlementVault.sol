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
import {ConfidentialVaultShared} from "./ConfidentialVaultShared.sol";

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
///         a payment pays. No key can create balance the vault was not paid,
///         and no key decides after the fact whose a payment is: each one is
///         bound to its merchant's slot, under a hiding commitment, in the
///         transaction that collects it.
/// @dev How money moves:
///      1. `collect`: the payer's ordinary EIP-3009 authorization to this
///         vault, executed by the vault itself, which records payer, nonce,
///         amount and UTC day, checks that its balance grew by exactly the
///         amount, and stores the payment's commitment
///         `keccak256(abi.encode(key, slot, blinding))` (the operator signs
///         which commitment goes with which payment; the merchant's receipt
///         is the opening, slot and blinding, and its side checks on-chain
///         at once that the commitment is its own). A collect without a
///         commitment (anyone's) is unattributed: only it may be returned.
///      2. The operator's batch for an ended day: `creditSlots` writes every
///         slot's encrypted credit into a pending bucket (not spendable),
///         summed in 128 bits so no credit can wrap the sum; `closeDay`
///         (refused while the operator bond does not cover the day's pool)
///         publishes `sum == the day's pool` for the KMS to decrypt;
///         `finalizeDay` (anyone, with the KMS proof) either closes the day
///         or, when the credits do not add up, throws them away for a new
///         attempt. A closed day's challenge window then runs; only after it,
///         with no challenge open, does `release` (anyone) move each slot's
///         credit into its balance.
///      2b. During the window anyone holding a slot's openings (its merchant,
///         a watcher it runs, the service) presents them (`challenge`): each
///         must open its payment's commitment to that slot. The slot's
///         credit is compared, under encryption, with what the openings add
///         up to; the KMS decrypts only the shortfall (zero when there is
///         none). A shortfall is proven misattribution: the day is disputed
///         (none of its split is ever released), the shortfall is paid from
///         the bond into the slot's balance, with the challenge bounty (a
///         base and a part per opening presented, from the bond no day
///         holds, so proving a theft never costs its challenger), neither
///         ever given back to the bond, and no day closes or releases until the bond owner
///         `resume`s with another operator key, which reopens for an honest
///         split the disputed day and every day closed or closing under the
///         disputed key and not yet released; after `MAX_FREEZE` with no
///         answer anyone may end the freeze (`endFreeze`), leaving no
///         operator, and merchants redeem by their openings.
///      3. A payment whose day is not closed a day after it ended, or whose
///         day is disputed, is redeemed by its opening (anyone may send it):
///         credited once to the slot its commitment names.
///      4. Withdrawals debit obliviously (the amount, or nothing when the
///         balance is short); the KMS-signed outcome releases the USDC; after
///         24 hours unfinalized the merchant may cancel and the debit is undone.
///      What the operator key can still do: assign slots (at most MAX_SLOTS),
///      delay a day, return an unattributed payment of an open day to its
///      payer, and
///      write a split that a slot's openings prove short, at the cost of the
///      shortfall and the challenge bounty from its bond. It cannot mint, wrap a credit around, spend
///      pending credit, move a merchant's balance, refund an attributed
///      payment, re-attribute a payment, or touch the bond.
///
///      Invariants:
///      - A slot is bound to `keccak256(abi.encode(merchant, salt))` when
///        assigned and never rebound; a payment to one slot when collected,
///        never to another. No merchant address is stored or logged until
///        that merchant withdraws (which names it, as it must).
///      - Every collected payment is in exactly one of: its day's pool (until
///        the day closes, then in slot balances), redeemed, or returned.
///      - collected - returned - paid out + bond + penalties = the vault's
///        USDC less stray; credited - paid out + bond <= the same.
///      - bond >= bondCommitted = the pools of the days closing, closed and
///        not released, or disputed (each day's share, less the penalties
///        it paid); a day's penalties never exceed its share; bounties
///        (counted in `totalPenalties` too) come only from `bond -
///        bondCommitted`.
///      - The runtime code may be placed with `anvil_setCode` (devnet), so no
///        immutables; `initialize` sets everything once, and the constructor
///        runs it in a real deployment (with the production floor on the
///        challenge window) so nobody can initialize it first.
///      - Three contracts, one storage: constants, types, storage and errors
///        are `ConfidentialVaultStorage`'s. This one keeps custody (collect,
///        the batch, release, redemptions, withdrawals, returns); the court
///        (`ConfidentialVaultCourt`: challenges, the bond, `resume`) and the
///        read-only lens (`ConfidentialVaultLens`) are deployed beside it and
///        run on this storage: the fallback runs the court's code
///        (delegatecall), and the court's fallback the lens's.
contract ConfidentialSettlementVault is ConfidentialVaultShared {
    using SafeERC20 for IERC20;

    // ---- events ----

    event Initialized(
        address asset,
        address operator,
        address bondOwner,
        uint256 challengeWindow,
        uint256 challengeBountyBase,
        uint256 challengeBountyPerOpening
    );
    event SlotAssigned(uint256 indexed slot, bytes32 commitment, address viewer);
    event Collected(uint256 indexed day, bytes32 indexed paymentKey, address indexed payer, uint256 amount);
    event PaymentReturned(uint256 indexed day, bytes32 indexed paymentKey, address indexed payer, uint256 amount);
    event StrayReturned(address indexed to, uint256 amount);
    event SlotsCredited(uint256 indexed day, uint256 attempt, uint256 count);
    event DayClosing(uint256 indexed day, uint256 attempt, uint256 pool, bytes32 matches);
    event DayRejected(uint256 indexed day, uint256 attempt);
    event DayClosed(uint256 indexed day, uint256 pool, uint256 payments);
    event SlotsReleased(uint256 indexed day, uint256 count);
    event Redeemed(bytes32 indexed paymentKey, uint256 indexed slot, uint256 amount);
    event WithdrawalRequested(
        uint256 indexed id, uint256 indexed slot, address indexed to, uint256 amount, uint256 nonce, bytes32 debited
    );
    event WithdrawalFinalized(uint256 indexed id, bool paid);
    event WithdrawalCancelled(uint256 indexed id);


    modifier onlyOperator() {
        if (msg.sender != operator) revert NotOperator();
        _;
    }

    // ---- setup ----

    /// @notice Deploys and initializes in one transaction, so no one can
    ///         initialize a fresh vault before its owner does; a deployed
    ///         vault's window is at least `MIN_CHALLENGE_WINDOW`, and its
    ///         bounty at least `MIN_CHALLENGE_BOUNTY_BASE` per proof and
    ///         `MIN_CHALLENGE_BOUNTY_PER_OPENING` per opening. (The devnet
    ///         places the runtime code instead and calls `initialize`, which
    ///         only code placed without its constructor can still run.)
    constructor(
        IERC20 asset_,
        address operator_,
        address bondOwner_,
        uint256 challengeWindow_,
        Bounty memory bounty,
        address lens_,
        address court_,
        CoprocessorConfig memory coprocessor
    ) {
        if (challengeWindow_ < MIN_CHALLENGE_WINDOW) revert BadChallengeWindow(challengeWindow_);
        if (bounty.base < MIN_CHALLENGE_BOUNTY_BASE || bounty.perOpening < MIN_CHALLENGE_BOUNTY_PER_OPENING) {
            revert BadChallengeBounty(bounty.base, bounty.perOpening);
        }
        _initialize(asset_, operator_, bondOwner_, challengeWindow_, bounty, lens_, court_, coprocessor);
    }

    /// @notice Sets the token, the operator (attributes payments, submits
    ///         batches, pays gas; the only account allowed to assign slots,
    ///         credit and return unattributed payments), the bond owner, the
    ///         challenge window (seconds), the challenge bounty (USDC base
    ///         units, paid from the bond on a proven shortfall), the lens
    ///         that answers the reads this contract leaves out, the court
    ///         that hears challenges and keeps the bond, and the chain's FHE
    ///         coprocessor.
    ///         Once; a deployed vault already ran it in its constructor.
    function initialize(
        IERC20 asset_,
        address operator_,
        address bondOwner_,
        uint256 challengeWindow_,
        Bounty calldata bounty,
        address lens_,
        address court_,
        CoprocessorConfig calldata coprocessor
    ) external {
        _initialize(asset_, operator_, bondOwner_, challengeWindow_, bounty, lens_, court_, coprocessor);
    }

    function _initialize(
        IERC20 asset_,
        address operator_,
        address bondOwner_,
        uint256 challengeWindow_,
        Bounty memory bounty,
        address lens_,
        address court_,
        CoprocessorConfig memory coprocessor
    ) private {
        if (_initialized) revert AlreadyInitialized();
        if (challengeWindow_ > MAX_CHALLENGE_WINDOW) revert BadChallengeWindow(challengeWindow_);
        _initialized = true;
        asset = asset_;
        operator = operator_;
        bondOwner = bondOwner_;
        challengeWindow = challengeWindow_;
        challengeBountyBase = bounty.base;
        challengeBountyPerOpening = bounty.perOpening;
        lens = lens_;
        court = court_;
        deploymentBlock = block.number;
        FHE.setCoprocessor(coprocessor);
        emit Initialized(
            address(asset_), operator_, bondOwner_, challengeWindow_, bounty.base, bounty.perOpening
        );
    }

    /// @notice Everything this contract leaves out runs `court`'s code on
    ///         this contract's storage: challenges, the bond and `resume`
    ///         (`ConfidentialVaultCourt`), and through the court's own
    ///         fallback the reads (`ConfidentialVaultLens`: `dayInfo`,
    ///         `payment`, `challengeInfo`, …). One address, one storage;
    ///         anything neither knows reverts.
    fallback() external {
        _delegate(court);
    }

    // ---- enablement ----

    /// @notice Binds a new slot to `commitment`, or returns the slot it already has
    ///         (`viewer` is then ignored). There is no way to change a slot's
    ///         commitment or viewer afterwards.
    /// @param viewer An address of the merchant's own tools (its key never
    ///        leaves them; 0: none) that may decrypt every pending credit and
    ///        balance of the slot, so the merchant checks its credit without
    ///        the operator. Set here, in the one call that creates the slot,
    ///        rather than by a later setter: no second operator-only call
    ///        and no "set once" state to guard, and the merchant's tools
    ///        check `viewerOf(slot)` once, knowing it can never change.
    function assignSlot(bytes32 commitment, address viewer) external onlyOperator returns (uint256 slot) {
        uint256 existing = _slotOfCommitment[commitment];
        if (existing != 0) return existing - 1;
        if (slotCount >= MAX_SLOTS) revert TooManySlots();
        slot = slotCount++;
        _slots[slot].commitment = commitment;
        _slots[slot].viewer = viewer;
        _slotOfCommitment[commitment] = slot + 1;
        emit SlotAssigned(slot, commitment, viewer);
    }

    // ---- payments ----

    /// @notice Collects a payer's EIP-3009 authorization to this vault (the
    ///         arguments of USDC's `transferWithAuthorization`, v/r/s form)
    ///         into today's pool. `attribution` is empty (an unattributed
    ///         payment, which only goes back to its payer), or the payment's
    ///         commitment followed by the operator's EIP-712 signature of
    ///         `Attribution(key, commitment)`. Anyone may submit it.
    function collect(
        address from,
        address to,
        uint256 value,
        uint256 validAfter,
        uint256 validBefore,
        bytes32 nonce,
        uint8 v,
        bytes32 r,
        bytes32 s,
        bytes calldata attribution
    ) external {
        uint256 before = _beforeCollect(from, to, value, nonce);
        IEIP3009(address(asset)).transferWithAuthorization(from, to, value, validAfter, validBefore, nonce, v, r, s);
        _afterCollect(from, value, nonce, before, attribution);
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
        bytes calldata signature,
        bytes calldata attribution
    ) external {
        uint256 before = _beforeCollect(from, to, value, nonce);
        IEIP3009(address(asset)).transferWithAuthorization(from, to, value, validAfter, validBefore, nonce, signature);
        _afterCollect(from, value, nonce, before, attribution);
    }

    /// @notice Sends unattributed payments of an open day back to their
    ///         payers (submitted to `collect` by someone else, with no
    ///         commitment). A payment committed to a slot is its merchant's
    ///         and is skipped. They leave the day's pool.
    function returnPayments(uint256 day, bytes32[] calldata keys) external onlyOperator {
        DayState storage d = _days[day];
        if (d.phase != DAY_OPEN) revert DayNotOpen(day, d.phase);
        for (uint256 i = 0; i < keys.length; i++) {
            Payment storage p = _payments[keys[i]];
            if (p.state != PAYMENT_COLLECTED || p.day != day || _commitments[keys[i]] != 0) continue;
            p.state = PAYMENT_RETURNED;
            d.returned += p.amount;
            totalReturned += p.amount;
            asset.safeTransfer(p.payer, p.amount);
            emit PaymentReturned(day, keys[i], p.payer, p.amount);
        }
    }

    /// @notice Sends USDC that reached the vault outside `collect` (a plain
    ///         transfer, or an authorization executed on the token directly:
    ///         no payment record and no credit stands for it) to the bond
    ///         owner, the one address fixed at deployment that answers for the
    ///         vault, which hands it back to whoever shows they sent it. The
    ///         vault cannot tell who sent it, so no caller names where it
    ///         goes; anyone may send it.
    function returnStray(uint256 amount) external {
        uint256 stray = strayBalance();
        if (amount > stray) revert NotStray(amount, stray);
        asset.safeTransfer(bondOwner, amount);
        emit StrayReturned(bondOwner, amount);
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
    ///         Refused while frozen by a proven shortfall, and while the bond
    ///         is below the pools every day holding it and this one.
    function closeDay(uint256 day) external onlyOperator {
        if (frozen) revert OperatorFrozen();
        DayState storage d = _creditableDay(day);
        if (d.slotsCredited != slotCount) revert DayIncomplete(day, d.slotsCredited, slotCount);
        uint256 pool = dayPool(day);
        uint256 required = bondCommitted + pool;
        if (bond < required) revert BondTooLow(bond, required);
        bondCommitted = required;
        d.bondShare = uint64(pool);
        _heldDays.push(day);
        d.heldAt = uint32(_heldDays.length);
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
    ///         discarded, its share of the bond freed, and the day reopens
    ///         for a new attempt. Anyone may submit the proof; not while frozen.
    function finalizeDay(uint256 day, bytes calldata cleartexts, bytes calldata decryptionProof) external {
        if (frozen) revert OperatorFrozen();
        DayState storage d = _days[day];
        if (d.phase != DAY_CLOSING) revert DayNotClosing(day);
        _checkDecryption(ebool.unwrap(d.matches), cleartexts, decryptionProof);
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
    ///         balance, once per slot, once its challenge window is over, no
    ///         challenge of it is open and no shortfall has frozen the vault.
    ///         Anyone may call it.
    function release(uint256 day, uint256[] calldata slotIds) external {
        DayState storage d = _days[day];
        if (d.phase != DAY_CLOSED) revert DayNotClosed(day);
        if (frozen) revert OperatorFrozen();
        uint256 endsAt = uint256(d.closedAt) + challengeWindow;
        if (block.timestamp < endsAt || d.openChallenges != 0) revert ChallengeWindowOpen(endsAt);
        _freeShare(d);
        uint32 mark = d.attempt + 1;
        uint256 released;
        for (uint256 i = 0; i < slotIds.length; i++) {
            uint256 id = slotIds[i];
            if (_creditedIn[id][day] != mark) continue;
            _creditedIn[id][day] = RELEASED;
            Slot storage s = _slots[id];
            // Cannot wrap: every balance is part of what closed days,
            // redemptions and penalties credited, which the vault holds in USDC (< 2^64).
            _setBalance(s, FHE.add(s.balance, _pending[id][day]));
            _pending[id][day] = euint64.wrap(0);
            released++;
        }
        d.slotsReleased += uint32(released);
        emit SlotsReleased(day, released);
    }

    // ---- receipts without us ----

    /// @notice Credits a payment to the slot its commitment names, given its
    ///         opening, when its day was not closed in time (at least
    ///         `REDEMPTION_DELAY` after the day ended, while it is open) or
    ///         is disputed. Anyone may send it; it can credit no other slot.
    ///         The payment leaves the day's pool, so no batch counts it again.
    function redeem(bytes32 key, uint256 slot, bytes32 blinding) external {
        _checkOpening(key, slot, blinding);
        Payment storage p = _payments[key];
        if (p.state != PAYMENT_COLLECTED) revert PaymentNotCollected(key);
        DayState storage d = _days[p.day];
        if (d.phase != DAY_DISPUTED) {
            if (d.phase != DAY_OPEN) revert DayNotOpen(p.day, d.phase);
            uint256 opensAt = (uint256(p.day) + 1) * DAY + REDEMPTION_DELAY;
            if (block.timestamp < opensAt) revert RedemptionNotOpen(opensAt);
        }
        p.state = PAYMENT_REDEEMED;
        d.redeemed += p.amount;
        totalCredited += p.amount;
        Slot storage s = _slots[slot];
        _setBalance(s, FHE.add(s.balance, FHE.asEuint64(p.amount)));
        _checkSolvent();
        emit Redeemed(key, slot, p.amount);
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
        bytes32 structHash = keccak256(abi.encode(WITHDRAW_TYPEHASH, req.slot, req.to, req.amount, req.nonce, req.deadline));
        if (!SignatureChecker.isValidSignatureNow(req.to, _typedDataHash(structHash), signature)) {
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
    ///         the debit happened; otherwise nothing moves. Refused when it
    ///         would take the payouts past everything ever credited.
    function finalizeWithdraw(uint256 id, bytes calldata cleartexts, bytes calldata decryptionProof) external {
        Withdrawal storage w = _withdrawal(id);
        if (w.state != WITHDRAWAL_DEBITED) revert NotDebited(id);
        _checkDecryption(ebool.unwrap(w.debited), cleartexts, decryptionProof);
        bool paid = abi.decode(cleartexts, (bool));
        w.state = WITHDRAWAL_FINALIZED;
        w.paid = paid;
        if (paid) {
            // Never more than was ever credited (closed days, redemptions,
            // penalties): even a forged decryption cannot pay out the bond
            // or an open day's pool.
            uint256 paidOut = totalPaidOut + w.amount;
            if (paidOut > totalCredited) revert Insolvent(paidOut, totalCredited);
            totalPaidOut = paidOut;
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

    function paymentKey(address payer, bytes32 nonce) public pure returns (bytes32) {
        return keccak256(abi.encode(payer, nonce));
    }

    /// @notice What the day's credits must add up to: collected, less redeemed and returned.
    function dayPool(uint256 day) public view returns (uint256) {
        return _dayPool(day);
    }

    /// @notice USDC the vault holds beyond what it owes: what reached it
    ///         outside `collect`.
    function strayBalance() public view returns (uint256) {
        uint256 owed = totalCollected - totalReturned + totalPenalties - totalPaidOut + bond;
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
        bytes32 key = paymentKey(from, nonce);
        if (_payments[key].state != 0) revert AlreadyCollected(key);
        return asset.balanceOf(address(this));
    }

    /// @dev After the token call: the vault must hold exactly `value` more
    ///      (a token that took a fee, or paid elsewhere, is refused).
    ///      Only the configured USDC is called, which makes no callbacks.
    function _afterCollect(
        address from,
        uint256 value,
        bytes32 nonce,
        uint256 balanceBefore,
        bytes calldata attribution
    ) private {
        uint256 received = asset.balanceOf(address(this)) - balanceBefore;
        if (received != value) revert PaymentShort(received, value);
        bytes32 key = paymentKey(from, nonce);
        if (attribution.length != 0) {
            bytes32 commitment = bytes32(attribution[:32]);
            bytes32 structHash = keccak256(abi.encode(ATTRIBUTION_TYPEHASH, key, commitment));
            if (commitment == 0 || ECDSA.recover(_typedDataHash(structHash), attribution[32:]) != operator) {
                revert InvalidSignature();
            }
            _commitments[key] = commitment;
        }
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
    ///      attempt's 128-bit sum. The operator may decrypt it, so the
    ///      service can show each merchant its credit during the window, and
    ///      so may the slot's viewer, so the merchant checks it without us.
    function _addPending(uint256 id, uint256 day, euint64 amount, euint128 sum) private returns (euint128) {
        FHE.allowThis(amount);
        FHE.allow(amount, operator);
        _allowViewer(_slots[id], amount);
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


    function _checkSolvent() private view {
        uint256 owed = totalCredited - totalPaidOut + bond;
        uint256 holdings = asset.balanceOf(address(this));
        if (owed > holdings) revert Insolvent(owed, holdings);
    }

    function _withdrawal(uint256 id) private view returns (Withdrawal storage w) {
        if (id >= withdrawalCount) revert UnknownWithdrawal(id);
        w = _withdrawals[id];
    }

    function _typedDataHash(bytes32 structHash) private view returns (bytes32) {
        return MessageHashUtils.toTypedDataHash(domainSeparator(), structHash);
    }
}
