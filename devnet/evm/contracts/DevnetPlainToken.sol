// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @title DevnetPlainToken
/// @notice A plain ERC-20 for local chains: transfer, approve, transferFrom
///         and nothing else. No EIP-3009, no EIP-2612, no EIP-712 domain, as
///         tokens like USDG (Paxos Global Dollar) that x402 moves through
///         Permit2 instead.
/// @dev Placed at the token's canonical address with `anvil_setCode`, so no
///      constructor runs: `initialize` sets the identity once.
contract DevnetPlainToken {
    string public name;
    string public symbol;
    uint8 public decimals;
    address public owner;
    bool private _initialized;

    uint256 public totalSupply;
    mapping(address => uint256) public balanceOf;
    mapping(address => mapping(address => uint256)) public allowance;

    event Transfer(address indexed from, address indexed to, uint256 value);
    event Approval(address indexed owner, address indexed spender, uint256 value);

    /// @notice Sets the token's identity once. Stands in for the constructor.
    function initialize(string calldata tokenName, string calldata tokenSymbol, uint8 tokenDecimals, address tokenOwner)
        external
    {
        require(!_initialized, "DevnetPlainToken: already initialized");
        require(tokenOwner != address(0), "DevnetPlainToken: owner is the zero address");
        _initialized = true;
        name = tokenName;
        symbol = tokenSymbol;
        decimals = tokenDecimals;
        owner = tokenOwner;
    }

    function mint(address to, uint256 amount) external {
        require(msg.sender == owner, "DevnetPlainToken: caller is not the owner");
        require(to != address(0), "DevnetPlainToken: mint to the zero address");
        totalSupply += amount;
        balanceOf[to] += amount;
        emit Transfer(address(0), to, amount);
    }

    function transfer(address to, uint256 value) external returns (bool) {
        _transfer(msg.sender, to, value);
        return true;
    }

    function approve(address spender, uint256 value) external returns (bool) {
        require(spender != address(0), "DevnetPlainToken: approve to the zero address");
        allowance[msg.sender][spender] = value;
        emit Approval(msg.sender, spender, value);
        return true;
    }

    function transferFrom(address from, address to, uint256 value) external returns (bool) {
        uint256 allowed = allowance[from][msg.sender];
        if (allowed != type(uint256).max) {
            require(allowed >= value, "DevnetPlainToken: transfer amount exceeds allowance");
            allowance[from][msg.sender] = allowed - value;
        }
        _transfer(from, to, value);
        return true;
    }

    function _transfer(address from, address to, uint256 value) private {
        require(from != address(0), "DevnetPlainToken: transfer from the zero address");
        require(to != address(0), "DevnetPlainToken: transfer to the zero address");
        uint256 balance = balanceOf[from];
        require(balance >= value, "DevnetPlainToken: transfer amount exceeds balance");
        unchecked {
            balanceOf[from] = balance - value;
        }
        balanceOf[to] += value;
        emit Transfer(from, to, value);
    }
}
