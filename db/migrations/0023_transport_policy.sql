CREATE TABLE "egress_assignments" (
	"user_id" text NOT NULL,
	"stream" text NOT NULL,
	"pool" text NOT NULL,
	"updated_at" bigint NOT NULL,
	CONSTRAINT "egress_assignments_user_id_stream_pk" PRIMARY KEY("user_id","stream")
);
--> statement-breakpoint
CREATE TABLE "egress_counters" (
	"user_id" text NOT NULL,
	"domain_id" text NOT NULL,
	"source" text NOT NULL,
	"pool" text NOT NULL,
	"hour" bigint NOT NULL,
	"sent" integer DEFAULT 0 NOT NULL,
	"deferred" integer DEFAULT 0 NOT NULL,
	"bounced" integer DEFAULT 0 NOT NULL,
	CONSTRAINT "egress_counters_user_id_domain_id_source_pool_hour_pk" PRIMARY KEY("user_id","domain_id","source","pool","hour")
);
--> statement-breakpoint
CREATE TABLE "mta_sts_policies" (
	"domain" text PRIMARY KEY NOT NULL,
	"record_id" text,
	"status" text NOT NULL,
	"mode" text,
	"mx" jsonb DEFAULT '[]'::jsonb NOT NULL,
	"max_age" integer,
	"error" text,
	"fetched_at" bigint NOT NULL,
	"expires_at" bigint NOT NULL
);
--> statement-breakpoint
ALTER TABLE "domains" ADD COLUMN "tls" text DEFAULT 'opportunistic' NOT NULL;--> statement-breakpoint
ALTER TABLE "domains" ADD COLUMN "egress_pinned" boolean DEFAULT false NOT NULL;--> statement-breakpoint
CREATE INDEX "egress_counters_hour_idx" ON "egress_counters" USING btree ("hour");