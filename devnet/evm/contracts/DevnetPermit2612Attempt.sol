// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

/// @dev The one EIP-2612 function the x402 Permit2 contracts call.
interface IDevnetERC20Permit {
    function permit(address owner, address spender, uint256 value, uint256 deadline, uint8 v, bytes32 r, bytes32 s)
        external;
}

/// @title DevnetPermit2612Attempt
/// @notice The best-effort EIP-2612 approval shared by the x402 Permit2
///         proxies and the Permit2 deposit collector: a payer's signed permit
///         approves Permit2 before the transfer (gasless onboarding). A failed
///         permit is reported in an event, not a revert, because the approval
///         may already exist (or someone may have used the permit first), and
///         then the transfer can still succeed.
abstract contract DevnetPermit2612Attempt {
    /// @notice The canonical Permit2, the spender every permit approves.
    address internal constant PERMIT2_ADDRESS = 0x000000000022D473030F116dDEE9F6B43aC78BA3;

    event EIP2612PermitFailedWithReason(address indexed token, address indexed owner, string reason);
    event EIP2612PermitFailedWithPanic(address indexed token, address indexed owner, uint256 errorCode);
    event EIP2612PermitFailedWithData(address indexed token, address indexed owner, bytes data);

    /// @dev Its own frame: the permit call's seven arguments would not fit beside a settle's.
    function _tryPermit2612(address token, address owner, uint256 value, uint256 deadline, uint8 v, bytes32 r, bytes32 s)
        internal
    {
        try IDevnetERC20Permit(token).permit(owner, PERMIT2_ADDRESS, value, deadline, v, r, s) {
            // approved
        } catch Error(string memory reason) {
            emit EIP2612PermitFailedWithReason(token, owner, reason);
        } catch Panic(uint256 errorCode) {
            emit EIP2612PermitFailedWithPanic(token, owner, errorCode);
        } catch (bytes memory data) {
            emit EIP2612PermitFailedWithData(token, owner, data);
        }
    }
}
