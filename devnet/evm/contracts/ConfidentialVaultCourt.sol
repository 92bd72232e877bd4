// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {FHE, euint64} from "@fhevm/solidity/lib/FHE.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {ConfidentialVaultShared} from "./ConfidentialVaultShared.sol";

/// @title ConfidentialVaultCourt
/// @notice The confidential settlement vault's court: challenges of a closed
///         day's split, their resolution by the KMS's answer, the operator
///         bond that pays a proven shortfall, and `resume` after one.
///         Deployed on its own and never called directly: the vault's
///         fallback runs this code (delegatecall) on the vault's storage, at
///         the vault's address, so merchants, watchers and the bond owner
///         call the vault as before. The vault keeps custody (collect, the
///         batch, redemptions, withdrawals); the court's code is the only
///         code that moves the bond. Called at its own address it acts on
///         its own empty storage, where there is no bond owner, slot, day or
///         token, so nothing it does there matters.
/// @dev Why delegatecall on shared storage rather than a contract of its own
///      with narrow calls into the vault: a challenge reads and writes the
///      same records custody does (a day's phase, attempt and bond share,
///      `bondCommitted`, `frozen`, `totalCredited`, a slot's pending credit
///      and balance), and the bond sits in the same USDC balance the
///      solvency checks count. Narrow calls would need a hook for each of
///      them, an ACL grant of every pending credit to the court, and a second
///      address for merchants' tools; one storage declaration
///      (`ConfidentialVaultStorage`) keeps the accounting in one place.
///      Anything the court does not know goes on to the lens (its fallback).
contract ConfidentialVaultCourt is ConfidentialVaultShared {
    using SafeERC20 for IERC20;

    event BondDeposited(address indexed from, uint256 amount);
    event BondWithdrawn(address indexed to, uint256 amount);
    event ChallengeOpened(uint256 indexed id, uint256 indexed day, uint256 indexed slot, uint256 amount, bytes32 handle);
    event ChallengeResolved(uint256 indexed id, uint256 shortfall);
    event DayDisputed(uint256 indexed day, uint256 indexed challenge);
    event PenaltyPaid(uint256 indexed day, uint256 indexed slot, uint256 amount);
    /// @notice `openings`: those the bounty paid for (the slot's in this
    ///         attempt not yet paid for); `amount`: what the bond paid.
    event BountyPaid(uint256 indexed day, uint256 indexed slot, uint256 openings, uint256 amount);
    event Resumed(address operator, uint256 reopenedDays);

    modifier onlyBondOwner() {
        if (msg.sender != bondOwner) revert NotBondOwner();
        _;
    }

    /// @notice The reads (`ConfidentialVaultLens`), on the same storage.
    fallback() external {
        _delegate(lens);
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

    /// @notice The bond owner takes back bond that no day holds; never while frozen.
    function withdrawBond(address to, uint256 amount) external onlyBondOwner {
        if (frozen) revert OperatorFrozen();
        if (amount > bond || bond - amount < bondCommitted) revert BondTooLow(bond, bondCommitted + amount);
        bond -= amount;
        asset.safeTransfer(to, amount);
        emit BondWithdrawn(to, amount);
    }

    /// @notice After a proven shortfall, the bond owner's answer: the
    ///         operator key becomes `newOperator` (neither zero nor the key
    ///         whose split was proven short), and every day the freeze held
    ///         reopens for an honest split of what was not redeemed: the
    ///         disputed days, and the days closed or closing under that key
    ///         and not yet released, whose splits are its too. The bond keeps
    ///         what it paid: nothing is given back to it. Also names an
    ///         operator again after `endFreeze` left the vault without one.
    function resume(address newOperator) external onlyBondOwner {
        if (!frozen && operator != address(0)) revert NotFrozen();
        if (newOperator == address(0) || newOperator == disputedOperator) revert BadOperator(newOperator);
        _unfreeze(newOperator);
    }

    /// @notice Ends a freeze the bond owner left unanswered for
    ///         `MAX_FREEZE`: anyone may send it. The held days reopen as in
    ///         `resume`, but no key becomes operator: nothing closes any
    ///         more, and every payment is redeemed by its opening once its
    ///         day is a day old, so no merchant's money waits on the bond
    ///         owner for longer than the freeze bound. The bond owner may
    ///         still name an operator later (`resume`).
    function endFreeze() external {
        if (!frozen) revert NotFrozen();
        uint256 endsAt = frozenAt + MAX_FREEZE;
        if (block.timestamp < endsAt) revert FreezeNotOver(endsAt);
        _unfreeze(address(0));
    }

    function _unfreeze(address newOperator) private {
        frozen = false;
        operator = newOperator;
        uint256 n = _heldDays.length;
        // Each reopen frees its day's share and takes it off the list.
        while (_heldDays.length != 0) {
            uint256 day = _heldDays[_heldDays.length - 1];
            DayState storage d = _days[day];
            // Every shortfall shown on it is decided (and paid) first.
            if (d.openChallenges != 0) revert ChallengesOpen(day);
            // A closed day's credits counted as owed; a disputed day's no longer do.
            if (d.phase == DAY_CLOSED) totalCredited -= _dayPool(day);
            _reopen(d);
        }
        emit Resumed(newOperator, n);
    }

    // ---- challenges: the commitment the operator must honour ----

    /// @notice Presents a slot's openings of `day` against its credit for
    ///         that day, during the day's challenge window (or while it is
    ///         disputed). Anyone may send it: each opening must open its
    ///         payment's commitment to `slot`, for a payment collected that
    ///         day, not redeemed or returned and not presented in this
    ///         attempt. The vault then computes, encrypted, how far the
    ///         slot's credit falls short of everything its openings showed
    ///         in this attempt; `resolveChallenge` takes the KMS's answer.
    ///         Reveals on-chain: the slot and these payments, not the merchant.
    function challenge(uint256 day, uint256 slot, Opening[] calldata openings) external returns (uint256 id) {
        DayState storage d = _days[day];
        // `closedAt` is 0 unless the day is closed or disputed, so an open or
        // closing day's window is long over.
        if (
            openings.length == 0
                || (d.phase != DAY_DISPUTED && block.timestamp >= uint256(d.closedAt) + challengeWindow)
        ) revert NotChallengeable(day);
        uint32 mark = d.attempt + 1;
        uint256 amount;
        for (uint256 i = 0; i < openings.length; i++) {
            bytes32 key = openings[i].key;
            Payment storage p = _payments[key];
            _checkOpening(key, slot, openings[i].blinding);
            if (p.state != PAYMENT_COLLECTED) revert PaymentNotCollected(key);
            if (p.day != day) revert PaymentNotOfDay(key);
            if (_presentedIn[key] == mark) revert AlreadyPresented(key);
            _presentedIn[key] = mark;
            amount += p.amount;
        }
        Presented storage shown = _presented[_presentedKey(slot, day, d.attempt)];
        uint256 total = shown.amount + amount;
        shown.amount = uint64(total);
        shown.openings += uint32(openings.length);
        euint64 credit = _creditedIn[slot][day] == mark ? _pending[slot][day] : FHE.asEuint64(0);
        euint64 shown_ = FHE.asEuint64(uint64(total));
        euint64 shortfall = FHE.select(FHE.lt(credit, shown_), FHE.sub(shown_, credit), FHE.asEuint64(0));
        FHE.allowThis(shortfall);
        FHE.makePubliclyDecryptable(shortfall);
        d.openChallenges += 1;
        id = challengeCount++;
        _challenges[id] = Challenge({
            slot: slot,
            day: uint32(day),
            attempt: d.attempt,
            state: CHALLENGE_OPEN,
            amount: uint64(amount),
            shortfall: 0,
            openAt: 0,
            handle: shortfall
        });
        _listOpen(id, day);
        emit ChallengeOpened(id, day, slot, amount, euint64.unwrap(shortfall));
    }

    /// @notice Settles a challenge with the KMS decryption of its shortfall.
    ///         Anyone may submit it. A shortfall disputes the day (nothing of
    ///         its split is released, the vault is frozen) and is paid from
    ///         the bond into the slot's balance, for good, with the bounty:
    ///         `challengeBountyBase` the first time the slot's openings of
    ///         the day and attempt prove one, and `challengeBountyPerOpening`
    ///         for each of them not yet paid for (those of earlier challenges
    ///         that showed no shortfall on their own included). No
    ///         shortfall: nothing moves, no bounty.
    function resolveChallenge(uint256 id, bytes calldata cleartexts, bytes calldata decryptionProof) external {
        Challenge storage c = _challenges[id];
        if (c.state != CHALLENGE_OPEN) revert ChallengeNotOpen(id);
        _checkDecryption(euint64.unwrap(c.handle), cleartexts, decryptionProof);
        uint256 shortfall = abi.decode(cleartexts, (uint64));
        c.state = CHALLENGE_RESOLVED;
        c.shortfall = uint64(shortfall);
        _closeChallenge(c);
        emit ChallengeResolved(id, shortfall);
        uint256 day = c.day;
        DayState storage d = _days[day];
        // Its attempt is the day's: no attempt is discarded while a
        // challenge of it is open (`resume` waits for them).
        d.openChallenges -= 1;
        if (shortfall == 0) return;
        if (d.phase == DAY_CLOSED) {
            d.phase = DAY_DISPUTED;
            totalCredited -= _dayPool(day);
            if (!frozen) {
                frozen = true;
                frozenAt = block.timestamp;
            }
            disputedOperator = operator;
            emit DayDisputed(day, id);
        }
        Presented storage shown = _presented[_presentedKey(c.slot, day, c.attempt)];
        uint256 owed;
        if (shortfall > shown.penalized) {
            // The day's share was reserved for exactly this: what its openings
            // show cannot exceed the pool it held at close.
            owed = shortfall - shown.penalized;
            shown.penalized = uint64(shortfall);
            d.bondShare -= uint64(owed);
            bondCommitted -= owed;
            bond -= owed;
            emit PenaltyPaid(day, c.slot, owed);
        }
        uint256 paid = owed + _bounty(shown, day, c.slot, owed);
        if (paid == 0) return;
        totalPenalties += paid;
        totalCredited += paid;
        Slot storage s = _slots[c.slot];
        _setBalance(s, FHE.add(s.balance, FHE.asEuint64(uint64(paid))));
    }

    /// @dev The bounty a proven shortfall pays for the slot's openings of the
    ///      day and attempt not yet paid for, and the base the first time.
    ///      Bounded, shortfall first: it comes only from the bond no day
    ///      holds (`bond - bondCommitted`, which nobody can withdraw while
    ///      the proof keeps the vault frozen), never from a day's share,
    ///      which stays whole for the shortfalls any slot of the day may
    ///      still prove (their openings may show the whole pool). When that
    ///      free bond cannot cover it, it pays what there is, and the rest
    ///      is never owed. `resume` gives none of it back. (With `owed`, the
    ///      shortfall paid beside it, it fits the 64-bit balance add.)
    function _bounty(Presented storage shown, uint256 day, uint256 slot, uint256 owed)
        private
        returns (uint256 paid)
    {
        uint256 openings = shown.openings - shown.rewarded;
        if (openings == 0) return 0;
        uint256 due = openings * challengeBountyPerOpening;
        if (shown.rewarded == 0) due += challengeBountyBase;
        shown.rewarded = shown.openings;
        uint256 free = bond - bondCommitted;
        uint256 room = type(uint64).max - owed;
        paid = due < free ? due : free;
        if (paid > room) paid = room;
        bond -= paid;
        shown.bounty += uint64(paid);
        totalBounties += paid;
        emit BountyPaid(day, slot, openings, paid);
    }

    /// @dev Puts a new challenge on its day's open list.
    function _listOpen(uint256 id, uint256 day) private {
        uint256[] storage open = _openChallengeIds[day];
        open.push(id);
        _challenges[id].openAt = uint32(open.length);
    }

    /// @dev Takes a resolved challenge off its day's open list (swap-and-pop).
    function _closeChallenge(Challenge storage c) private {
        uint256[] storage open = _openChallengeIds[c.day];
        uint256 index = c.openAt;
        uint256 last = open[open.length - 1];
        open[index - 1] = last;
        _challenges[last].openAt = uint32(index);
        open.pop();
        c.openAt = 0;
    }
}
