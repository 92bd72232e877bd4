-- A failure after something was sent can be the service's own refusal (the
-- failed-fee budget spent, no signer, a fee above the ceiling) after a
-- sponsored funding went out: 'service' charges it to nobody. No payer is
-- cooled for it and no account's failure limit counts it.
ALTER TABLE settlements DROP CONSTRAINT settlements_failure_cause_check;
ALTER TABLE settlements ADD CONSTRAINT settlements_failure_cause_check
  CHECK (failure_cause IN ('payer', 'requirements', 'service'));
