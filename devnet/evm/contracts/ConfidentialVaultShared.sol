// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {FHE, ebool, euint64, euint128} from "@fhevm/solidity/lib/FHE.sol";
import {ConfidentialVaultStorage} from "./ConfidentialVaultStorage.sol";

/// @title ConfidentialVaultShared
/// @notice What both contracts that write the vault's storage need: the
///         custody contract (`ConfidentialSettlementVault`) and the court
///         (`ConfidentialVaultCourt`, whose code the vault runs on the same
///         storage). Internal only: each contract compiles in just what it uses.
abstract contract ConfidentialVaultShared is ConfidentialVaultStorage {
    /// @dev What the day's credits must add up to: collected, less redeemed and returned.
    function _dayPool(uint256 day) internal view returns (uint256) {
        DayState storage d = _days[day];
        return uint256(d.collected) - d.redeemed - d.returned;
    }

    /// @dev The commitment binds the payment to exactly one slot.
    function _checkOpening(bytes32 key, uint256 slot, bytes32 blinding) internal view {
        if (slot >= slotCount) revert UnknownSlot(slot);
        bytes32 c = _commitments[key];
        if (c == 0 || keccak256(abi.encode(key, slot, blinding)) != c) revert NotTheOpening(key);
    }

    function _checkDecryption(bytes32 handle, bytes calldata cleartexts, bytes calldata decryptionProof) internal {
        bytes32[] memory handles = new bytes32[](1);
        handles[0] = handle;
        FHE.checkSignatures(handles, cleartexts, decryptionProof);
    }

    /// @dev Whatever of the bond the day holds is no longer needed, and a
    ///      resume no longer reopens it.
    function _freeShare(DayState storage d) internal {
        bondCommitted -= d.bondShare;
        d.bondShare = 0;
        uint256 index = d.heldAt;
        if (index == 0) return;
        // Swap-and-pop: the last held day takes its place.
        uint256 last = _heldDays[_heldDays.length - 1];
        _heldDays[index - 1] = last;
        _days[last].heldAt = uint32(index);
        _heldDays.pop();
        d.heldAt = 0;
    }

    /// @dev Discards a day's credits for a new attempt, and frees its share
    ///      of the bond. No challenge of it is open: a closing day has none,
    ///      and a resume waits for a held day's.
    function _reopen(DayState storage d) internal {
        _freeShare(d);
        d.phase = DAY_OPEN;
        d.attempt += 1;
        d.slotsCredited = 0;
        d.closedAt = 0;
        d.creditedSum = euint128.wrap(0);
        d.matches = ebool.wrap(0);
    }

    /// @dev Every new balance handle: the vault keeps using it, the operator
    ///      may decrypt it (the service's dashboard), so may the slot's
    ///      viewer (the merchant's own tools), and so may the merchant once
    ///      a withdrawal has named it.
    function _setBalance(Slot storage s, euint64 balance) internal {
        s.balance = balance;
        FHE.allowThis(balance);
        FHE.allow(balance, operator);
        _allowViewer(s, balance);
        if (s.revealedOwner != address(0)) FHE.allow(balance, s.revealedOwner);
    }

    /// @dev Lets the slot's viewer decrypt a handle of the slot's money
    ///      (its pending credit of a day, its balance).
    function _allowViewer(Slot storage s, euint64 handle) internal {
        address viewer = s.viewer;
        if (viewer != address(0)) FHE.allow(handle, viewer);
    }

    /// @dev Runs `target`'s code on this storage with this call's data, and
    ///      answers (or reverts) with what it answered.
    function _delegate(address target) internal {
        assembly {
            calldatacopy(0, 0, calldatasize())
            let ok := delegatecall(gas(), target, 0, calldatasize(), 0, 0)
            returndatacopy(0, 0, returndatasize())
            if iszero(ok) { revert(0, returndatasize()) }
            return(0, returndatasize())
        }
    }
}
