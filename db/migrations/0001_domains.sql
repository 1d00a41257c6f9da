CREATE TABLE "domain_registrations" (
	"id" text PRIMARY KEY NOT NULL,
	"user_id" text NOT NULL,
	"domain" text NOT NULL,
	"registrar" text NOT NULL,
	"status" text NOT NULL,
	"reference" text,
	"years" integer NOT NULL,
	"amount_cents" integer NOT NULL,
	"currency" text NOT NULL,
	"contact" jsonb NOT NULL,
	"created_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "domains" (
	"id" text PRIMARY KEY NOT NULL,
	"user_id" text NOT NULL,
	"domain" text NOT NULL,
	"status" text NOT NULL,
	"mx_verified" integer DEFAULT 0 NOT NULL,
	"spf_verified" integer DEFAULT 0 NOT NULL,
	"dkim_verified" integer DEFAULT 0 NOT NULL,
	"dmarc_verified" integer DEFAULT 0 NOT NULL,
	"zero_retention" integer DEFAULT 0 NOT NULL,
	"track_opens" integer DEFAULT 0 NOT NULL,
	"enc_public_key" text,
	"enc_key_alg" text,
	"enc_fingerprint" text,
	"enc_format" text,
	"provider" text NOT NULL,
	"email_provider_id" text,
	"dns_tokens" text,
	"last_checked_at" bigint,
	"created_at" bigint NOT NULL,
	"updated_at" bigint NOT NULL,
	"tracking_webhook_url" text,
	"webhook_events" text,
	"dkim_selector" text NOT NULL,
	"dkim_public_key" text NOT NULL,
	"dkim_private_key_sealed" text NOT NULL,
	"sending_enabled" boolean DEFAULT false NOT NULL,
	"hosted" boolean DEFAULT false NOT NULL
);
--> statement-breakpoint
CREATE TABLE "hosted_dns_records" (
	"id" text PRIMARY KEY NOT NULL,
	"domain_id" text,
	"name" text NOT NULL,
	"type" text NOT NULL,
	"value" text NOT NULL,
	"priority" integer,
	"ttl" integer DEFAULT 300 NOT NULL,
	"created_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX "domain_registrations_domain_uq" ON "domain_registrations" USING btree ("domain");--> statement-breakpoint
CREATE UNIQUE INDEX "domains_user_domain_uq" ON "domains" USING btree ("user_id","domain");--> statement-breakpoint
CREATE UNIQUE INDEX "domains_hosted_uq" ON "domains" USING btree ("domain") WHERE hosted;--> statement-breakpoint
CREATE INDEX "domains_domain_idx" ON "domains" USING btree ("domain");--> statement-breakpoint
CREATE INDEX "hosted_dns_name_idx" ON "hosted_dns_records" USING btree ("name");--> statement-breakpoint
CREATE INDEX "hosted_dns_domain_idx" ON "hosted_dns_records" USING btree ("domain_id");