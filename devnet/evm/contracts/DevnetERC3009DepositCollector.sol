// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";

/// @dev The bytes-signature form of EIP-3009's receive, which contract payers can use too.
interface IDevnetERC3009 {
    function receiveWithAuthorization(
        address from,
        address to,
        uint256 value,
        uint256 validAfter,
        uint256 validBefore,
        bytes32 nonce,
        bytes memory signature
    ) external;
}

/// @title DevnetERC3009DepositCollector
/// @notice The batch-settlement deposit collector for EIP-3009 tokens on local
///         chains, with the same ABI and behaviour as x402-foundation's
///         ERC3009DepositCollector: it redeems the payer's
///         `receiveWithAuthorization` (which only the named recipient, this
///         contract, may call, so the authorization cannot be front-run into
///         a plain transfer) and forwards the tokens to the escrow.
/// @dev The authorization nonce is bound to the channel:
///      `keccak256(abi.encode(channelId, salt))`. Placed with `anvil_setCode`,
///      so the escrow address is a constant.
contract DevnetERC3009DepositCollector {
    using SafeERC20 for IERC20;

    /// @notice The batch-settlement escrow this collector serves.
    address public constant x402BatchSettlement = 0x4020074e9dF2ce1deE5A9C1b5c3f541D02a10003;

    error OnlyX402BatchSettlement();

    /// @param data `abi.encode(validAfter, validBefore, salt, signature)`.
    function collect(address payer, address token, uint256 amount, bytes32 channelId, bytes calldata data) external {
        if (msg.sender != x402BatchSettlement) revert OnlyX402BatchSettlement();
        (uint256 validAfter, uint256 validBefore, uint256 salt, bytes memory signature) =
            abi.decode(data, (uint256, uint256, uint256, bytes));
        IDevnetERC3009(token).receiveWithAuthorization(
            payer, address(this), amount, validAfter, validBefore, keccak256(abi.encode(channelId, salt)), signature
        );
        IERC20(token).safeTransfer(x402BatchSettlement, amount);
    }
}
