ALTER TABLE "users" ADD COLUMN "session_version" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "domains" ADD COLUMN "ownership_verified" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "domains" ADD COLUMN "last_check_error" text;--> statement-breakpoint
-- Domains verified or sending before ownership tokens existed keep working (their MX/SPF/DKIM were seen).
UPDATE "domains" SET "ownership_verified" = 1 WHERE "hosted" OR "status" = 'verified' OR "sending_enabled";--> statement-breakpoint
CREATE UNIQUE INDEX "domains_verified_uq" ON "domains" USING btree ("domain") WHERE status = 'verified';