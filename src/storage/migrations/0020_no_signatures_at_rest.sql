-- A settlement's stored request keeps the signed payment only while the
-- reconciler may need it (the row is pending). Once the row is final its
-- signatures and signed transactions are dropped: a signed authorization of
-- a failed settle may still be valid, and anyone who can read the database
-- could otherwise submit it. What is left (payer, nonce, amounts, the
-- requirements) is what the dashboard and the records need.
CREATE FUNCTION redact_signed(doc jsonb) RETURNS jsonb LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF jsonb_typeof(doc) = 'object' THEN
    RETURN coalesce(
      (SELECT jsonb_object_agg(k, redact_signed(v)) FROM jsonb_each(doc) AS e(k, v)
        WHERE k NOT IN ('signature', 'signatures', 'signedDelegateAction', 'signedTxBlob',
          'transaction', 'claimAuthorizerSignature', 'refundSignature', 'signedApproval')),
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
  WHERE status <> 'pending' AND request ? 'paymentPayload';
