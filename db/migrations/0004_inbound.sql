CREATE TABLE "deliveries" (
	"id" text PRIMARY KEY NOT NULL,
	"user_id" text NOT NULL,
	"message_id" text NOT NULL,
	"route_id" text NOT NULL,
	"domain_id" text,
	"url" text NOT NULL,
	"kind" text NOT NULL,
	"status" text NOT NULL,
	"attempts" integer DEFAULT 0 NOT NULL,
	"last_status_code" integer,
	"last_reason" text,
	"next_retry_at" bigint,
	"retry_attempts" integer DEFAULT 0 NOT NULL,
	"workflow_id" text,
	"payload" jsonb,
	"created_at" bigint NOT NULL,
	"updated_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "delivery_attempts" (
	"id" text PRIMARY KEY NOT NULL,
	"delivery_id" text NOT NULL,
	"message_id" text NOT NULL,
	"attempt_number" integer NOT NULL,
	"ok" integer NOT NULL,
	"reason" text,
	"request_headers" text,
	"request_body" text,
	"response_status" integer,
	"response_headers" text,
	"response_body" text,
	"duration_ms" integer,
	"requested_at" bigint NOT NULL,
	"created_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "inbound_raw" (
	"message_id" text PRIMARY KEY NOT NULL,
	"content" "bytea" NOT NULL,
	"encrypted" boolean DEFAULT false NOT NULL,
	"enc_alg" text,
	"created_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "routes" (
	"id" text PRIMARY KEY NOT NULL,
	"user_id" text NOT NULL,
	"domain_id" text NOT NULL,
	"pattern" text NOT NULL,
	"url" text NOT NULL,
	"ack_mode" text DEFAULT 'lenient' NOT NULL,
	"secret_sealed" text NOT NULL,
	"created_at" bigint NOT NULL,
	"updated_at" bigint NOT NULL
);
--> statement-breakpoint
ALTER TABLE "users" ADD COLUMN "webhook_secret_sealed" text;--> statement-breakpoint
ALTER TABLE "messages" ADD COLUMN "thread_id" text;--> statement-breakpoint
ALTER TABLE "messages" ADD COLUMN "auth" jsonb;--> statement-breakpoint
ALTER TABLE "messages" ADD COLUMN "envelope_from" text;--> statement-breakpoint
ALTER TABLE "messages" ADD COLUMN "received_at" bigint;--> statement-breakpoint
ALTER TABLE "messages" ADD COLUMN "size_bytes" integer;--> statement-breakpoint
ALTER TABLE "domains" ADD COLUMN "webhook_health" jsonb;--> statement-breakpoint
ALTER TABLE "events" ADD COLUMN "webhook_state" text;--> statement-breakpoint
CREATE INDEX "deliveries_message_idx" ON "deliveries" USING btree ("message_id","created_at");--> statement-breakpoint
CREATE INDEX "deliveries_user_idx" ON "deliveries" USING btree ("user_id","created_at");--> statement-breakpoint
CREATE UNIQUE INDEX "delivery_attempts_uq" ON "delivery_attempts" USING btree ("delivery_id","attempt_number");--> statement-breakpoint
CREATE INDEX "delivery_attempts_created_idx" ON "delivery_attempts" USING btree ("created_at");--> statement-breakpoint
CREATE UNIQUE INDEX "routes_domain_pattern_uq" ON "routes" USING btree ("domain_id","pattern");--> statement-breakpoint
CREATE INDEX "routes_user_idx" ON "routes" USING btree ("user_id");--> statement-breakpoint
CREATE INDEX "messages_thread_idx" ON "messages" USING btree ("user_id","thread_id");--> statement-breakpoint
CREATE INDEX "events_webhook_state_idx" ON "events" USING btree ("webhook_state","domain_id");