-- The slot's viewer: an address the merchant's own tools hold the key of,
-- unlinkable to its wallet, that the vault lets decrypt every pending credit
-- and balance of the slot. Recorded with the first enablement and sent with
-- the slot's assignment; like the withdrawal address it never changes once
-- recorded, so an assignment resumed after a lost answer names the same one.
ALTER TABLE confidential_merchants ADD COLUMN viewer_address text;

CREATE OR REPLACE FUNCTION confidential_merchant_is_permanent() RETURNS trigger AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    RAISE EXCEPTION 'a confidential withdrawal address is permanent and cannot be removed';
  END IF;
  IF NEW.merchant_address <> OLD.merchant_address
     OR (OLD.slot IS NOT NULL AND NEW.slot IS DISTINCT FROM OLD.slot) THEN
    RAISE EXCEPTION 'a confidential withdrawal address is permanent and cannot be reassigned';
  END IF;
  IF NEW.viewer_address IS DISTINCT FROM OLD.viewer_address THEN
    RAISE EXCEPTION 'a confidential slot''s viewer is permanent and cannot be changed';
  END IF;
  RETURN NEW;
END
$$ LANGUAGE plpgsql;
