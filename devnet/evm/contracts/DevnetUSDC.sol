// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {SignatureChecker} from "@openzeppelin/contracts/utils/cryptography/SignatureChecker.sol";

/// @title DevnetUSDC
/// @notice A token for local chains that behaves like Circle's USDC (FiatToken
///         v2.2) for everything an x402 payer or facilitator touches: ERC-20,
///         EIP-3009 transfer/receive/cancel with authorization (ECDSA and
///         ERC-1271 signatures, `v,r,s` and `bytes` overloads), EIP-2612
///         permit, and the same revert reasons, so error mapping written
///         against real USDC works unchanged here.
/// @dev Invariants that follow from how the devnet uses this code:
///      - The runtime code is placed at the canonical USDC address with
///        `anvil_setCode`, so no constructor ever runs there. Hence no
///        immutables and no constructor-set state: everything is set once by
///        `initialize`.
///      - The EIP-712 domain separator is computed on every call from storage
///        (name, version), `block.chainid` and `address(this)`, never cached,
///        because none of the three is known when the bytecode is built.
///      - Left out on purpose: pausing, blacklisting, minter allowances and
///        proxy upgradeability. x402 never touches them, and a devnet that
///        cannot be paused has one less way to fail confusingly.
contract DevnetUSDC {
    // ---- EIP-712 type hashes (exactly as EIP-3009, EIP-2612 and FiatToken) ----

    bytes32 private constant EIP712_DOMAIN_TYPEHASH =
        keccak256("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)");
    bytes32 public constant TRANSFER_WITH_AUTHORIZATION_TYPEHASH = keccak256(
        "TransferWithAuthorization(address from,address to,uint256 value,uint256 validAfter,uint256 validBefore,bytes32 nonce)"
    );
    bytes32 public constant RECEIVE_WITH_AUTHORIZATION_TYPEHASH = keccak256(
        "ReceiveWithAuthorization(address from,address to,uint256 value,uint256 validAfter,uint256 validBefore,bytes32 nonce)"
    );
    bytes32 public constant CANCEL_AUTHORIZATION_TYPEHASH =
        keccak256("CancelAuthorization(address authorizer,bytes32 nonce)");
    bytes32 public constant PERMIT_TYPEHASH =
        keccak256("Permit(address owner,address spender,uint256 value,uint256 nonce,uint256 deadline)");

    /// @dev Upper bound for `s` in a non-malleable secp256k1 signature (n / 2).
    uint256 private constant SECP256K1_HALF_N = 0x7FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF5D576E7357A4501DDFE92F46681B20A0;

    // ---- storage (all of it written by initialize, mint and the token logic) ----

    string public name;
    string public symbol;
    uint8 public decimals;
    string private _version;
    address public owner;
    bool private _initialized;

    uint256 public totalSupply;
    mapping(address => uint256) public balanceOf;
    mapping(address => mapping(address => uint256)) public allowance;
    /// @notice EIP-2612 permit nonces.
    mapping(address => uint256) public nonces;
    mapping(address => mapping(bytes32 => bool)) private _authorizationStates;

    // ---- events ----

    event Transfer(address indexed from, address indexed to, uint256 value);
    event Approval(address indexed owner, address indexed spender, uint256 value);
    event Mint(address indexed minter, address indexed to, uint256 amount);
    event AuthorizationUsed(address indexed authorizer, bytes32 indexed nonce);
    event AuthorizationCanceled(address indexed authorizer, bytes32 indexed nonce);

    // ---- setup ----

    /// @notice Sets the token's identity once. Stands in for the constructor,
    ///         which never runs for code placed with `anvil_setCode`.
    function initialize(
        string calldata tokenName,
        string calldata tokenSymbol,
        uint8 tokenDecimals,
        string calldata tokenVersion,
        address tokenOwner
    ) external {
        require(!_initialized, "DevnetUSDC: already initialized");
        require(tokenOwner != address(0), "DevnetUSDC: owner is the zero address");
        _initialized = true;
        name = tokenName;
        symbol = tokenSymbol;
        decimals = tokenDecimals;
        _version = tokenVersion;
        owner = tokenOwner;
    }

    /// @notice The EIP-712 domain version ("2" for USDC).
    function version() external view returns (string memory) {
        return _version;
    }

    /// @notice Computed per call: see the contract notes.
    function DOMAIN_SEPARATOR() public view returns (bytes32) {
        return keccak256(
            abi.encode(
                EIP712_DOMAIN_TYPEHASH, keccak256(bytes(name)), keccak256(bytes(_version)), block.chainid, address(this)
            )
        );
    }

    /// @notice Devnet funding. Only the owner set by `initialize` may mint.
    function mint(address to, uint256 amount) external returns (bool) {
        require(msg.sender == owner, "FiatToken: caller is not a minter");
        require(to != address(0), "FiatToken: mint to the zero address");
        require(amount > 0, "FiatToken: mint amount not greater than 0");
        totalSupply += amount;
        balanceOf[to] += amount;
        emit Mint(msg.sender, to, amount);
        emit Transfer(address(0), to, amount);
        return true;
    }

    // ---- ERC-20 ----

    function transfer(address to, uint256 value) external returns (bool) {
        _transfer(msg.sender, to, value);
        return true;
    }

    function approve(address spender, uint256 value) external returns (bool) {
        _approve(msg.sender, spender, value);
        return true;
    }

    /// @dev Like FiatToken, an allowance of 2^256-1 is not special: every
    ///      transferFrom spends from it. Code tested here must not rely on
    ///      "infinite" approvals staying infinite.
    function transferFrom(address from, address to, uint256 value) external returns (bool) {
        uint256 allowed = allowance[from][msg.sender];
        require(value <= allowed, "ERC20: transfer amount exceeds allowance");
        allowance[from][msg.sender] = allowed - value;
        _transfer(from, to, value);
        return true;
    }

    function increaseAllowance(address spender, uint256 increment) external returns (bool) {
        _approve(msg.sender, spender, allowance[msg.sender][spender] + increment);
        return true;
    }

    function decreaseAllowance(address spender, uint256 decrement) external returns (bool) {
        uint256 current = allowance[msg.sender][spender];
        require(decrement <= current, "ERC20: decreased allowance below zero");
        _approve(msg.sender, spender, current - decrement);
        return true;
    }

    // ---- EIP-3009 ----

    /// @notice True once a nonce has been used or canceled by `authorizer`.
    function authorizationState(address authorizer, bytes32 nonce) external view returns (bool) {
        return _authorizationStates[authorizer][nonce];
    }

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
    ) external {
        // FiatToken v2.2 packs v,r,s into the 65-byte form and takes the bytes
        // path, so both overloads check signatures identically.
        _transferWithAuthorization(from, to, value, validAfter, validBefore, nonce, abi.encodePacked(r, s, v));
    }

    function transferWithAuthorization(
        address from,
        address to,
        uint256 value,
        uint256 validAfter,
        uint256 validBefore,
        bytes32 nonce,
        bytes memory signature
    ) external {
        _transferWithAuthorization(from, to, value, validAfter, validBefore, nonce, signature);
    }

    function receiveWithAuthorization(
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
        _receiveWithAuthorization(from, to, value, validAfter, validBefore, nonce, abi.encodePacked(r, s, v));
    }

    function receiveWithAuthorization(
        address from,
        address to,
        uint256 value,
        uint256 validAfter,
        uint256 validBefore,
        bytes32 nonce,
        bytes memory signature
    ) external {
        _receiveWithAuthorization(from, to, value, validAfter, validBefore, nonce, signature);
    }

    function cancelAuthorization(address authorizer, bytes32 nonce, uint8 v, bytes32 r, bytes32 s) external {
        _cancelAuthorization(authorizer, nonce, abi.encodePacked(r, s, v));
    }

    function cancelAuthorization(address authorizer, bytes32 nonce, bytes memory signature) external {
        _cancelAuthorization(authorizer, nonce, signature);
    }

    // ---- EIP-2612 ----

    function permit(address holder, address spender, uint256 value, uint256 deadline, uint8 v, bytes32 r, bytes32 s)
        external
    {
        _permit(holder, spender, value, deadline, abi.encodePacked(r, s, v));
    }

    function permit(address holder, address spender, uint256 value, uint256 deadline, bytes memory signature)
        external
    {
        _permit(holder, spender, value, deadline, signature);
    }

    // ---- internals ----

    function _transferWithAuthorization(
        address from,
        address to,
        uint256 value,
        uint256 validAfter,
        uint256 validBefore,
        bytes32 nonce,
        bytes memory signature
    ) private {
        _requireValidAuthorization(from, nonce, validAfter, validBefore);
        _requireValidSignature(
            from,
            keccak256(abi.encode(TRANSFER_WITH_AUTHORIZATION_TYPEHASH, from, to, value, validAfter, validBefore, nonce)),
            signature
        );
        _markAuthorizationAsUsed(from, nonce);
        _transfer(from, to, value);
    }

    function _receiveWithAuthorization(
        address from,
        address to,
        uint256 value,
        uint256 validAfter,
        uint256 validBefore,
        bytes32 nonce,
        bytes memory signature
    ) private {
        // Only the payee may submit, so a front-runner cannot burn the
        // authorization inside someone else's deposit flow.
        require(to == msg.sender, "FiatTokenV2: caller must be the payee");
        _requireValidAuthorization(from, nonce, validAfter, validBefore);
        _requireValidSignature(
            from,
            keccak256(abi.encode(RECEIVE_WITH_AUTHORIZATION_TYPEHASH, from, to, value, validAfter, validBefore, nonce)),
            signature
        );
        _markAuthorizationAsUsed(from, nonce);
        _transfer(from, to, value);
    }

    function _cancelAuthorization(address authorizer, bytes32 nonce, bytes memory signature) private {
        _requireUnusedAuthorization(authorizer, nonce);
        _requireValidSignature(
            authorizer, keccak256(abi.encode(CANCEL_AUTHORIZATION_TYPEHASH, authorizer, nonce)), signature
        );
        _authorizationStates[authorizer][nonce] = true;
        emit AuthorizationCanceled(authorizer, nonce);
    }

    function _permit(address holder, address spender, uint256 value, uint256 deadline, bytes memory signature)
        private
    {
        // FiatToken v2.2 treats deadline 2^256-1 as "never expires".
        require(deadline == type(uint256).max || deadline >= block.timestamp, "FiatTokenV2: permit is expired");
        bytes32 structHash = keccak256(abi.encode(PERMIT_TYPEHASH, holder, spender, value, nonces[holder]++, deadline));
        require(_isValidSignatureNow(holder, _typedDataDigest(structHash), signature), "EIP2612: invalid signature");
        _approve(holder, spender, value);
    }

    /// @dev Time checks are strict on both ends, as in FiatToken: valid only
    ///      when validAfter < block.timestamp < validBefore.
    function _requireValidAuthorization(address authorizer, bytes32 nonce, uint256 validAfter, uint256 validBefore)
        private
        view
    {
        require(block.timestamp > validAfter, "FiatTokenV2: authorization is not yet valid");
        require(block.timestamp < validBefore, "FiatTokenV2: authorization is expired");
        _requireUnusedAuthorization(authorizer, nonce);
    }

    function _requireUnusedAuthorization(address authorizer, bytes32 nonce) private view {
        require(!_authorizationStates[authorizer][nonce], "FiatTokenV2: authorization is used or canceled");
    }

    function _requireValidSignature(address signer, bytes32 structHash, bytes memory signature) private view {
        require(_isValidSignatureNow(signer, _typedDataDigest(structHash), signature), "FiatTokenV2: invalid signature");
    }

    /// @dev FiatToken v2.2's rule: an address without code must have signed
    ///      with ECDSA; an address with code (a smart wallet, or an EIP-7702
    ///      delegated account) is asked through ERC-1271 and nothing else.
    ///      Unlike OpenZeppelin's SignatureChecker, which tries ECDSA first for
    ///      every signer, so the ERC-1271 half is all we borrow from it.
    function _isValidSignatureNow(address signer, bytes32 digest, bytes memory signature) private view returns (bool) {
        if (signer.code.length == 0) return _recover(digest, signature) == signer;
        return SignatureChecker.isValidERC1271SignatureNow(signer, digest, signature);
    }

    /// @dev Strict ECDSA recovery with the revert reasons of Circle's
    ///      ECRecover: a malformed signature reverts rather than returning a
    ///      wrong signer, exactly as mainnet USDC does.
    function _recover(bytes32 digest, bytes memory signature) private pure returns (address) {
        require(signature.length == 65, "ECRecover: invalid signature length");
        bytes32 r;
        bytes32 s;
        uint8 v;
        assembly ("memory-safe") {
            r := mload(add(signature, 0x20))
            s := mload(add(signature, 0x40))
            v := byte(0, mload(add(signature, 0x60)))
        }
        require(uint256(s) <= SECP256K1_HALF_N, "ECRecover: invalid signature 's' value");
        require(v == 27 || v == 28, "ECRecover: invalid signature 'v' value");
        address signer = ecrecover(digest, v, r, s);
        require(signer != address(0), "ECRecover: invalid signature");
        return signer;
    }

    function _markAuthorizationAsUsed(address authorizer, bytes32 nonce) private {
        _authorizationStates[authorizer][nonce] = true;
        emit AuthorizationUsed(authorizer, nonce);
    }

    function _typedDataDigest(bytes32 structHash) private view returns (bytes32) {
        return keccak256(abi.encodePacked("\x19\x01", DOMAIN_SEPARATOR(), structHash));
    }

    function _transfer(address from, address to, uint256 value) private {
        require(from != address(0), "ERC20: transfer from the zero address");
        require(to != address(0), "ERC20: transfer to the zero address");
        require(value <= balanceOf[from], "ERC20: transfer amount exceeds balance");
        balanceOf[from] -= value;
        balanceOf[to] += value;
        emit Transfer(from, to, value);
    }

    function _approve(address holder, address spender, uint256 value) private {
        require(holder != address(0), "ERC20: approve from the zero address");
        require(spender != address(0), "ERC20: approve to the zero address");
        allowance[holder][spender] = value;
        emit Approval(holder, spender, value);
    }
}
