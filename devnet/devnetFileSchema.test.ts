/**
 * The devnet file as devnet mode writes it (`bootDevnet`, what `npm start`
 * runs, with an EVM chain and every other family's ledger) validates against
 * the JSON Schema in docs/, so the file and its documentation cannot drift:
 * every entry names its assets as a map from symbol to asset id, and every
 * funded key parses with its family's official client library. A file in
 * the older shapes (NEAR's single `asset`, XRPL's `{ currency, issuer }`)
 * reads back in today's.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Ajv2020 } from "ajv/dist/2020.js";
import { privateKeyToAccount } from "viem/accounts";
import { createKeyPairSignerFromBytes, getBase58Encoder } from "@solana/kit";
import { Wallet } from "xrpl";
import { KeyPair } from "@near-js/crypto";
import { Signer } from "starknet";
import { loadConfig } from "../src/config/index.js";
import { bootDevnet, type DevnetMode } from "./serviceMode.js";
import { createLogger } from "../src/lib/logger.js";
import { readDevnetFile, updateDevnetFile } from "./devnetFile.js";
import { SOLANA_MAINNET } from "./svm/index.js";
import { XRPL_MAINNET } from "./xrpl/index.js";
import { NEAR_MAINNET } from "./near/index.js";
import { STARKNET_MAINNET } from "./starknet/index.js";
import { StarknetLedger } from "./starknet/ledger.js";

const schema = JSON.parse(
  readFileSync(new URL("../docs/devnet-file.schema.json", import.meta.url), "utf8"),
) as object;

describe("the devnet file and its schema", () => {
  const dir = mkdtempSync(join(tmpdir(), "devnet-file-"));
  const file = join(dir, "devnet.json");
  let mode: DevnetMode | undefined;
  const validate = new Ajv2020({ allErrors: true, strict: true }).compile(schema);
  const errors = () => JSON.stringify(validate.errors, null, 2);

  before(async () => {
    const config = loadConfig({
      FACILITATOR_MODE: "devnet",
      LOG_LEVEL: "silent",
      DATA_DIR: join(dir, "data"),
      DEVNET_FILE: file,
      DEVNET_BLOCK_TIME: "0",
      DEVNET_NETWORKS: [
        "eip155:8453",
        SOLANA_MAINNET,
        XRPL_MAINNET,
        NEAR_MAINNET,
        STARKNET_MAINNET,
      ].join(","),
    });
    mode = await bootDevnet(config, () => undefined, createLogger("silent"));
    // What `announce` adds once the service listens.
    await updateDevnetFile(file, {
      facilitatorUrl: "http://127.0.0.1:4020",
      apiKey: "x402_sk_devnet",
    });
  });
  after(async () => {
    await mode?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const written = () =>
    JSON.parse(readFileSync(file, "utf8")) as {
      networks: Record<string, Record<string, unknown>>;
    };

  test("the file devnet mode writes validates against docs/devnet-file.schema.json", () => {
    const doc = written();
    assert.deepEqual(
      Object.keys(doc.networks).sort(),
      ["eip155:8453", NEAR_MAINNET, SOLANA_MAINNET, STARKNET_MAINNET, XRPL_MAINNET].sort(),
    );
    assert.ok(validate(doc), errors());
  });

  test("every entry names its assets as a map from symbol to asset id", () => {
    const { networks } = written();
    for (const [id, entry] of Object.entries(networks)) {
      const assets = entry["assets"] as Record<string, unknown>;
      assert.ok(assets && Object.keys(assets).length > 0, id);
      for (const [symbol, asset] of Object.entries(assets)) {
        assert.equal(typeof asset, "string", `${id} ${symbol}`);
      }
    }
    assert.equal(networks[NEAR_MAINNET]!["asset"], undefined, "NEAR no longer writes asset");
    assert.deepEqual(networks[XRPL_MAINNET]!["assets"], {
      XRP: "XRP",
      RLUSD: "524C555344000000000000000000000000000000",
    });
  });

  test("every funded key parses with its family's official library", async () => {
    const { networks } = written();
    const evm = networks["eip155:8453"]!;
    for (const key of evm["payerPrivateKeys"] as `0x${string}`[]) {
      assert.match(privateKeyToAccount(key).address, /^0x[0-9a-fA-F]{40}$/);
    }
    for (const key of networks[SOLANA_MAINNET]!["payerSecretKeys"] as string[]) {
      const signer = await createKeyPairSignerFromBytes(getBase58Encoder().encode(key));
      assert.ok(signer.address);
    }
    for (const seed of networks[XRPL_MAINNET]!["payerSeeds"] as string[]) {
      assert.match(Wallet.fromSeed(seed).classicAddress, /^r/);
    }
    for (const p of networks[NEAR_MAINNET]!["payers"] as { secretKey: string }[]) {
      assert.ok(
        KeyPair.fromString(p.secretKey as never)
          .getPublicKey()
          .toString(),
      );
    }
    for (const p of networks[STARKNET_MAINNET]!["payers"] as {
      address: string;
      privateKey: string;
    }[]) {
      assert.match(await new Signer(p.privateKey).getPubKey(), /^0x[0-9a-f]+$/);
      assert.equal(BigInt(StarknetLedger.accountAddress(p.privateKey)), BigInt(p.address));
    }
  });

  test("a file in the older shapes reads back in today's, and validates", async () => {
    const old = written() as unknown as {
      networks: Record<string, Record<string, unknown>>;
    };
    const near = old.networks[NEAR_MAINNET]!;
    const xrpl = old.networks[XRPL_MAINNET]!;
    const { assets: nearAssets, ...nearRest } = near;
    const { issuers, ...xrplRest } = xrpl;
    const older = {
      ...old,
      networks: {
        ...old.networks,
        [NEAR_MAINNET]: { ...nearRest, asset: (nearAssets as { USDC: string }).USDC },
        [XRPL_MAINNET]: {
          ...xrplRest,
          assets: {
            XRP: "XRP",
            RLUSD: {
              currency: (xrpl["assets"] as { RLUSD: string }).RLUSD,
              issuer: (issuers as { RLUSD: string }).RLUSD,
            },
          },
        },
      },
    };
    const path = join(dir, "older.json");
    writeFileSync(path, JSON.stringify(older));
    assert.equal(validate(older), false, "the older shapes are not today's");
    const read = await readDevnetFile(path);
    assert.ok(validate(read), errors());
    assert.deepEqual(read.networks[NEAR_MAINNET], near);
    assert.deepEqual(read.networks[XRPL_MAINNET], xrpl);
  });
});
