// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @title DevnetPermit2
/// @notice The SignatureTransfer half of Uniswap's Permit2, written for local
///         chains, with the same ABI, EIP-712 hashing, nonce scheme and custom
///         errors, so signatures made for the real Permit2 (for example by the
///         official x402 EVM client) verify here unchanged.
/// @dev Invariants that follow from how the devnet uses this code:
///      - The runtime code is placed at the canonical Permit2 address
///        (0x000000000022D473030F116dDEE9F6B43aC78BA3) with `anvil_setCode`,
///        so no constructor runs: there is no immutable or constructor-set
///        state, and the domain separator is computed on every call from
///        `block.chainid` and `address(this)`.
///      - The EIP-712 domain is {name: "Permit2", chainId, verifyingContract},
///        with no version field, exactly as Permit2's.
///      - Tokens are pulled with `transferFrom`, so an owner must first have
///        approved this contract on the token (the x402 "one-time approval").
///      - The AllowanceTransfer half of Permit2 is left out: x402 never uses it.
contract DevnetPermit2 {
    // ---- types (field order and names as in ISignatureTransfer) ----

    struct TokenPermissions {
        address token;
        uint256 amount;
    }

    struct PermitTransferFrom {
        TokenPermissions permitted;
        uint256 nonce;
        uint256 deadline;
    }

    struct SignatureTransferDetails {
        address to;
        uint256 requestedAmount;
    }

    // ---- EIP-712 ----

    bytes32 private constant DOMAIN_TYPEHASH =
        keccak256("EIP712Domain(string name,uint256 chainId,address verifyingContract)");
    bytes32 private constant NAME_HASH = keccak256("Permit2");

    bytes32 public constant TOKEN_PERMISSIONS_TYPEHASH = keccak256("TokenPermissions(address token,uint256 amount)");
    bytes32 public constant PERMIT_TRANSFER_FROM_TYPEHASH = keccak256(
        "PermitTransferFrom(TokenPermissions permitted,address spender,uint256 nonce,uint256 deadline)TokenPermissions(address token,uint256 amount)"
    );
    /// @dev The caller-supplied witness type string completes this stub, e.g.
    ///      "Witness witness)TokenPermissions(address token,uint256 amount)Witness(...)".
    string public constant PERMIT_WITNESS_TRANSFER_FROM_TYPEHASH_STUB =
        "PermitWitnessTransferFrom(TokenPermissions permitted,address spender,uint256 nonce,uint256 deadline,";

    bytes4 private constant ERC1271_MAGIC_VALUE = 0x1626ba7e;
    bytes32 private constant UPPER_BIT_MASK = 0x7fffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff;

    // ---- state ----

    /// @notice owner => word position => bitmap of used (or invalidated) nonces.
    mapping(address => mapping(uint256 => uint256)) public nonceBitmap;

    // ---- events and errors (as Permit2's) ----

    event UnorderedNonceInvalidation(address indexed owner, uint256 word, uint256 mask);

    error SignatureExpired(uint256 signatureDeadline);
    error InvalidAmount(uint256 maxAmount);
    error InvalidNonce();
    error InvalidSignature();
    error InvalidSigner();
    error InvalidSignatureLength();
    error InvalidContractSignature();

    // ---- views ----

    function DOMAIN_SEPARATOR() public view returns (bytes32) {
        return keccak256(abi.encode(DOMAIN_TYPEHASH, NAME_HASH, block.chainid, address(this)));
    }

    // ---- transfers ----

    /// @notice Transfers `owner`'s tokens to `transferDetails.to`, authorized by
    ///         `owner`'s signature over the permit with `msg.sender` as spender.
    function permitTransferFrom(
        PermitTransferFrom calldata permit,
        SignatureTransferDetails calldata transferDetails,
        address owner,
        bytes calldata signature
    ) external {
        bytes32 structHash = keccak256(
            abi.encode(
                PERMIT_TRANSFER_FROM_TYPEHASH, _hashTokenPermissions(permit.permitted), msg.sender, permit.nonce, permit.deadline
            )
        );
        _transfer(permit, transferDetails, owner, structHash, signature);
    }

    /// @notice As `permitTransferFrom`, with extra signed data (`witness`, the
    ///         EIP-712 hash of the witness struct) whose type the caller names.
    function permitWitnessTransferFrom(
        PermitTransferFrom calldata permit,
        SignatureTransferDetails calldata transferDetails,
        address owner,
        bytes32 witness,
        string calldata witnessTypeString,
        bytes calldata signature
    ) external {
        bytes32 typeHash = keccak256(abi.encodePacked(PERMIT_WITNESS_TRANSFER_FROM_TYPEHASH_STUB, witnessTypeString));
        bytes32 structHash = keccak256(
            abi.encode(typeHash, _hashTokenPermissions(permit.permitted), msg.sender, permit.nonce, permit.deadline, witness)
        );
        _transfer(permit, transferDetails, owner, structHash, signature);
    }

    /// @notice Marks nonces as used: sets the bits of `mask` in word `wordPos`.
    function invalidateUnorderedNonces(uint256 wordPos, uint256 mask) external {
        nonceBitmap[msg.sender][wordPos] |= mask;
        emit UnorderedNonceInvalidation(msg.sender, wordPos, mask);
    }

    // ---- internals ----

    function _transfer(
        PermitTransferFrom calldata permit,
        SignatureTransferDetails calldata transferDetails,
        address owner,
        bytes32 structHash,
        bytes calldata signature
    ) private {
        uint256 requestedAmount = transferDetails.requestedAmount;
        if (block.timestamp > permit.deadline) revert SignatureExpired(permit.deadline);
        if (requestedAmount > permit.permitted.amount) revert InvalidAmount(permit.permitted.amount);
        _useUnorderedNonce(owner, permit.nonce);
        bytes32 digest = keccak256(abi.encodePacked("\x19\x01", DOMAIN_SEPARATOR(), structHash));
        _verify(signature, digest, owner);
        _safeTransferFrom(permit.permitted.token, owner, transferDetails.to, requestedAmount);
    }

    function _hashTokenPermissions(TokenPermissions calldata permitted) private pure returns (bytes32) {
        return keccak256(abi.encode(TOKEN_PERMISSIONS_TYPEHASH, permitted.token, permitted.amount));
    }

    /// @dev The low 8 bits of a nonce pick a bit, the rest pick a word.
    function _useUnorderedNonce(address from, uint256 nonce) private {
        uint256 wordPos = nonce >> 8;
        uint256 bit = 1 << (nonce & 0xff);
        uint256 flipped = nonceBitmap[from][wordPos] ^= bit;
        if (flipped & bit == 0) revert InvalidNonce();
    }

    /// @dev ECDSA (65-byte or EIP-2098 64-byte) for accounts without code,
    ///      ERC-1271 for contracts, as Permit2's SignatureVerification.
    function _verify(bytes calldata signature, bytes32 digest, address claimedSigner) private view {
        if (claimedSigner.code.length == 0) {
            bytes32 r;
            bytes32 s;
            uint8 v;
            if (signature.length == 65) {
                r = bytes32(signature[0:32]);
                s = bytes32(signature[32:64]);
                v = uint8(signature[64]);
            } else if (signature.length == 64) {
                r = bytes32(signature[0:32]);
                bytes32 vs = bytes32(signature[32:64]);
                s = vs & UPPER_BIT_MASK;
                v = uint8(uint256(vs >> 255)) + 27;
            } else {
                revert InvalidSignatureLength();
            }
            address signer = ecrecover(digest, v, r, s);
            if (signer == address(0)) revert InvalidSignature();
            if (signer != claimedSigner) revert InvalidSigner();
        } else {
            (bool ok, bytes memory ret) =
                claimedSigner.staticcall(abi.encodeWithSelector(ERC1271_MAGIC_VALUE, digest, signature));
            if (!ok || ret.length < 32 || abi.decode(ret, (bytes4)) != ERC1271_MAGIC_VALUE) {
                revert InvalidContractSignature();
            }
        }
    }

    /// @dev Accepts tokens that return true and tokens that return nothing.
    function _safeTransferFrom(address token, address from, address to, uint256 amount) private {
        (bool ok, bytes memory ret) =
            token.call(abi.encodeWithSelector(bytes4(keccak256("transferFrom(address,address,uint256)")), from, to, amount));
        if (!ok || token.code.length == 0 || (ret.length != 0 && !abi.decode(ret, (bool)))) {
            revert("TRANSFER_FROM_FAILED");
        }
    }
}
