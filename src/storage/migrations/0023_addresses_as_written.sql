-- Base58 (Solana) and r-address (XRPL) ids were stored lower-cased, which
-- names another account or none. From now on only hex ids (EVM, Starknet)
-- are lower-cased; here a row's recipient and asset are restored from the
-- requirements its request kept. A payer of such a row stays as it was: the
-- request holds no spelling of it to restore.
UPDATE settlements
  SET pay_to = request -> 'paymentRequirements' ->> 'payTo',
      asset = request -> 'paymentRequirements' ->> 'asset'
  WHERE split_part(network, ':', 1) NOT IN ('eip155', 'starknet')
    AND request -> 'paymentRequirements' ->> 'payTo' IS NOT NULL
    AND request -> 'paymentRequirements' ->> 'asset' IS NOT NULL
    AND lower(request -> 'paymentRequirements' ->> 'payTo') = pay_to
    AND lower(request -> 'paymentRequirements' ->> 'asset') = asset;
