// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {ebool, euint64} from "@fhevm/solidity/lib/FHE.sol";
import {ConfidentialVaultStorage} from "./ConfidentialVaultStorage.sol";

/// @title ConfidentialVaultLens
/// @notice The confidential settlement vault's multi-value reads. Deployed on
///         its own and never called directly: the vault's fallback runs this
///         code (delegatecall) on the vault's storage, so every read below
///         is the vault's own, at the vault's address. It writes nothing and
///         holds nothing; the vault keeps what moves money, so it has room
///         to grow under EIP-170.
contract ConfidentialVaultLens is ConfidentialVaultStorage {

    /// @notice What the vault collected for a payment (state 0: nothing), and
    ///         its commitment to a slot (0: unattributed).
    function payment(bytes32 key)
        external
        view
        returns (address payer, uint64 amount, uint32 day, uint8 state, bytes32 commitment)
    {
        Payment storage p = _payments[key];
        return (p.payer, p.amount, p.day, p.state, _commitments[key]);
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
    /// @return day the day challenged
    /// @return attempt the attempt whose credit it compared
    /// @return amount what its own openings add up to
    /// @return resolved whether the KMS's answer is in
    /// @return shortfall the answer: how far the slot's credit fell short (0: not)
    /// @return handle the encrypted shortfall, publicly decryptable
    function challengeInfo(uint256 id)
        external
        view
        returns (uint256 slot, uint32 day, uint32 attempt, uint64 amount, bool resolved, uint64 shortfall, bytes32 handle)
    {
        Challenge storage c = _challenges[id];
        return (
            c.slot, c.day, c.attempt, c.amount, c.state == CHALLENGE_RESOLVED, c.shortfall, euint64.unwrap(c.handle)
        );
    }

    /// @notice Whether a payment was presented in its day's current attempt.
    function presented(bytes32 key) external view returns (bool) {
        Payment storage p = _payments[key];
        return p.state != 0 && _presentedIn[key] == _days[p.day].attempt + 1;
    }

    /// @notice The ids of `day`'s challenges awaiting the KMS's answer.
    function openChallengeIds(uint256 day) external view returns (uint256[] memory) {
        return _openChallengeIds[day];
    }

    /// @return amount what a slot's openings of `day` showed in `attempt`
    /// @return penalized the shortfall paid for them from the bond
    function presentedOf(uint256 slot, uint256 day, uint32 attempt)
        external
        view
        returns (uint256 amount, uint256 penalized)
    {
        Presented storage shown = _presented[_presentedKey(slot, day, attempt)];
        return (shown.amount, shown.penalized);
    }

    /// @return openings how many openings of `day` a slot presented in `attempt`
    /// @return paid the bounty the bond paid the slot for them
    function bountyOf(uint256 slot, uint256 day, uint32 attempt)
        external
        view
        returns (uint256 openings, uint256 paid)
    {
        Presented storage shown = _presented[_presentedKey(slot, day, attempt)];
        return (shown.openings, shown.bounty);
    }

    /// @notice A slot's credit of `day` in its current attempt, until released (0: none).
    function slotDayCredit(uint256 slot, uint256 day) external view returns (bytes32) {
        return _creditedIn[slot][day] == _days[day].attempt + 1 ? euint64.unwrap(_pending[slot][day]) : bytes32(0);
    }

    /// @return closedAt when the day closed (0: not closed); its window ends `challengeWindow` later
    /// @return openChallenges challenges of its current attempt awaiting the KMS's answer
    /// @return bondShare what of the bond it holds
    function dayChallenges(uint256 day)
        external
        view
        returns (uint256 closedAt, uint256 openChallenges, uint256 bondShare)
    {
        DayState storage d = _days[day];
        return (d.closedAt, d.openChallenges, d.bondShare);
    }

    /// @notice The days a freeze holds and a resume reopens: closing, closed
    ///         and not yet released, or disputed.
    function heldDays() external view returns (uint256[] memory) {
        return _heldDays;
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

    /// @notice The address the slot's merchant committed at assignment that may
    ///         decrypt the slot's pending credits and balance (0: none).
    function viewerOf(uint256 slot) external view returns (address) {
        if (slot >= slotCount) revert UnknownSlot(slot);
        return _slots[slot].viewer;
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

    function _withdrawal(uint256 id) private view returns (Withdrawal storage w) {
        if (id >= withdrawalCount) revert UnknownWithdrawal(id);
        w = _withdrawals[id];
    }
}
