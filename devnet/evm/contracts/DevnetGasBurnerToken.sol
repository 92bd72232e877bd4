// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @title DevnetGasBurnerToken
/// @notice A hostile token, for tests of what a facilitator pays gas for: it
///         answers every read like an EIP-3009 token. Once armed, a
///         simulation of `transferWithAuthorization` run at a gas price of
///         zero succeeds, but a call that pays for its gas burns all the gas
///         it was given. Never listed by the service; a test lists it to
///         measure what the gas ceiling and the failure limit bound.
contract DevnetGasBurnerToken {
    string public constant name = "Gas Burner";
    string public constant version = "1";
    uint8 public constant decimals = 6;

    /// @notice How many loop turns a simulation spends, so a test can make
    ///         the estimate as large as it likes.
    uint256 public immutable simulatedWork;

    /// @notice Burns every call while set, whatever its gas price: a test sets
    ///         it in the block that mines a settlement, after the
    ///         facilitator's simulation (run with its fee) passed, the way a
    ///         token's state can change between a simulation and inclusion.
    bool public armed;

    function setArmed(bool armed_) external {
        armed = armed_;
    }

    event Transfer(address indexed from, address indexed to, uint256 value);

    constructor(uint256 work) {
        simulatedWork = work;
    }

    function balanceOf(address) external pure returns (uint256) {
        return 1e18;
    }

    function authorizationState(address, bytes32) external pure returns (bool) {
        return false;
    }

    function transferWithAuthorization(
        address from,
        address to,
        uint256 value,
        uint256,
        uint256,
        bytes32,
        uint8,
        bytes32,
        bytes32
    ) external {
        _burnWhenMined();
        emit Transfer(from, to, value);
    }

    function transferWithAuthorization(
        address from,
        address to,
        uint256 value,
        uint256,
        uint256,
        bytes32,
        bytes calldata
    ) external {
        _burnWhenMined();
        emit Transfer(from, to, value);
    }

    /// @dev A simulation without a fee runs at a gas price of zero; a mined call pays one.
    function _burnWhenMined() private view {
        uint256 spin;
        if (tx.gasprice == 0 || !armed) {
            for (uint256 i = 0; i < simulatedWork; i++) spin += i;
            return;
        }
        while (gasleft() > 0) spin++;
    }
}
