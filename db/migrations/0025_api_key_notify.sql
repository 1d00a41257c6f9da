-- Each process keeps a short-lived cache of API keys by hash. On commit, every change that can end a key
-- (delete, on any path: rotation, revocation, domain or account removal, cascades) tells every process which
-- key to forget; TRUNCATE tells them to forget all. Inserts need no message: unknown keys are never cached.
CREATE OR REPLACE FUNCTION "api_keys_notify_change"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('api_keys_changed', OLD."key_hash");
  RETURN OLD;
END $$;
--> statement-breakpoint
CREATE TRIGGER "api_keys_notify_change" AFTER DELETE OR UPDATE OF "key_hash", "user_id", "kind", "domain_id" ON "api_keys"
  FOR EACH ROW EXECUTE FUNCTION "api_keys_notify_change"();
--> statement-breakpoint
CREATE OR REPLACE FUNCTION "api_keys_notify_truncate"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('api_keys_changed', '');
  RETURN NULL;
END $$;
--> statement-breakpoint
CREATE TRIGGER "api_keys_notify_truncate" AFTER TRUNCATE ON "api_keys"
  FOR EACH STATEMENT EXECUTE FUNCTION "api_keys_notify_truncate"();
