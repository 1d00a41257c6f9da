-- Each ingress process keeps the receiving config (a domain by name with its routes) for a few seconds. On
-- commit, a change to a domain or a route tells every process to read it again. A domain's webhook health
-- and its updated_at alone are not receiving config: changes to nothing else notify nobody.
CREATE OR REPLACE FUNCTION "receiving_config_notify"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('receiving_config_changed', '');
  RETURN NULL;
END $$;
--> statement-breakpoint
CREATE TRIGGER "domains_receiving_config_insert_delete" AFTER INSERT OR DELETE ON "domains"
  FOR EACH STATEMENT EXECUTE FUNCTION "receiving_config_notify"();
--> statement-breakpoint
CREATE TRIGGER "domains_receiving_config_update" AFTER UPDATE ON "domains"
  FOR EACH ROW WHEN ((to_jsonb(OLD) - 'webhook_health' - 'updated_at') IS DISTINCT FROM (to_jsonb(NEW) - 'webhook_health' - 'updated_at'))
  EXECUTE FUNCTION "receiving_config_notify"();
--> statement-breakpoint
CREATE TRIGGER "domains_receiving_config_truncate" AFTER TRUNCATE ON "domains"
  FOR EACH STATEMENT EXECUTE FUNCTION "receiving_config_notify"();
--> statement-breakpoint
CREATE TRIGGER "routes_receiving_config" AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON "routes"
  FOR EACH STATEMENT EXECUTE FUNCTION "receiving_config_notify"();
