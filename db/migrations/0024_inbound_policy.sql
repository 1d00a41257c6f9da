CREATE TABLE "sender_rules" (
	"id" text PRIMARY KEY NOT NULL,
	"user_id" text NOT NULL,
	"domain_id" text NOT NULL,
	"kind" text NOT NULL,
	"value" text NOT NULL,
	"action" text NOT NULL,
	"origin" text DEFAULT 'api' NOT NULL,
	"note" text,
	"created_at" bigint NOT NULL
);
--> statement-breakpoint
ALTER TABLE "messages" ADD COLUMN "spam" jsonb;--> statement-breakpoint
ALTER TABLE "messages" ADD COLUMN "held_reason" text;--> statement-breakpoint
ALTER TABLE "messages" ADD COLUMN "held_until" bigint;--> statement-breakpoint
ALTER TABLE "messages" ADD COLUMN "released_at" bigint;--> statement-breakpoint
ALTER TABLE "domains" ADD COLUMN "spam_hold_score" double precision;--> statement-breakpoint
ALTER TABLE "domains" ADD COLUMN "spam_refuse_score" double precision;--> statement-breakpoint
ALTER TABLE "domains" ADD COLUMN "refuse_dmarc_reject" boolean DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE "delivery_attempts" ADD COLUMN "control" jsonb;--> statement-breakpoint
CREATE UNIQUE INDEX "sender_rules_uq" ON "sender_rules" USING btree ("domain_id","kind","value");--> statement-breakpoint
CREATE INDEX "sender_rules_user_idx" ON "sender_rules" USING btree ("user_id");