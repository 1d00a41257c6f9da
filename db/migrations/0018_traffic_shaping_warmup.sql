CREATE TABLE "shaping_actions" (
	"id" text PRIMARY KEY NOT NULL,
	"site" text NOT NULL,
	"action" text NOT NULL,
	"rule" text NOT NULL,
	"cause" text NOT NULL,
	"created_at" bigint NOT NULL,
	"expires_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "shaping_leases" (
	"id" text PRIMARY KEY NOT NULL,
	"site" text NOT NULL,
	"holder" text NOT NULL,
	"expires_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "shaping_sites" (
	"site" text PRIMARY KEY NOT NULL,
	"msg_tokens" double precision NOT NULL,
	"msg_at" bigint NOT NULL,
	"conn_tokens" double precision NOT NULL,
	"conn_at" bigint NOT NULL,
	"suspended_until" bigint,
	"suspend_cause" text,
	"overrides" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"limits" jsonb,
	"domains" jsonb DEFAULT '[]'::jsonb NOT NULL,
	"updated_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "warmup_counts" (
	"domain_id" text NOT NULL,
	"site" text NOT NULL,
	"day" integer NOT NULL,
	"sent" integer NOT NULL,
	CONSTRAINT "warmup_counts_domain_id_site_day_pk" PRIMARY KEY("domain_id","site","day")
);
--> statement-breakpoint
CREATE TABLE "warmup_plans" (
	"domain_id" text PRIMARY KEY NOT NULL,
	"user_id" text NOT NULL,
	"schedule" jsonb NOT NULL,
	"day_ms" bigint NOT NULL,
	"day" integer NOT NULL,
	"started_at" bigint NOT NULL,
	"day_started_at" bigint NOT NULL,
	"completed_at" bigint
);
--> statement-breakpoint
CREATE INDEX "shaping_actions_site_idx" ON "shaping_actions" USING btree ("site","expires_at");--> statement-breakpoint
CREATE INDEX "shaping_actions_expires_idx" ON "shaping_actions" USING btree ("expires_at");--> statement-breakpoint
CREATE INDEX "shaping_leases_site_idx" ON "shaping_leases" USING btree ("site","expires_at");