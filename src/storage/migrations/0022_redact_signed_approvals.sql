-- A payer's signed approve(Permit2) rides in the payment's
-- erc20ApprovalGasSponsoring extension as `signedTransaction`. Once its
-- settlement is final it is dropped like every other signature: an approve
-- that was never broadcast could still be, by anyone who reads the database.
CREATE OR REPLACE FUNCTION redact_signed(doc jsonb) RETURNS jsonb LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF jsonb_typeof(doc) = 'object' THEN
    RETURN coalesce(
      (SELECT jsonb_object_agg(k, redact_signed(v)) FROM jsonb_each(doc) AS e(k, v)
        WHERE k NOT IN ('signature', 'signatures', 'signedDelegateAction', 'signedTxBlob',
          'transaction', 'claimAuthorizerSignature', 'refundSignature', 'signedApproval',
          'signedTransaction')),
      '{}'::jsonb);
  ELSIF jsonb_typeof(doc) = 'array' THEN
    RETURN coalesce((SELECT jsonb_agg(redact_signed(v)) FROM jsonb_array_elements(doc) AS e(v)),
      '[]'::jsonb);
  END IF;
  RETURN doc;
END
$$;

UPDATE settlements
  SET request = jsonb_set(request, '{paymentPayload}', redact_signed(request -> 'paymentPayload'))
  WHERE status <> 'pending' AND request -> 'paymentPayload' @? '$.**.signedTransaction';
