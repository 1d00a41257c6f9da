CREATE TABLE "events" (
	"id" text PRIMARY KEY NOT NULL,
	"user_id" text NOT NULL,
	"message_id" text,
	"domain_id" text,
	"type" text NOT NULL,
	"recipient" text,
	"data" jsonb,
	"created_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "scheduled_sends" (
	"id" text PRIMARY KEY NOT NULL,
	"user_id" text NOT NULL,
	"message_id" text NOT NULL,
	"scheduled_at" bigint NOT NULL,
	"status" text NOT NULL,
	"created_at" bigint NOT NULL,
	"updated_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "stored_files" (
	"id" text PRIMARY KEY NOT NULL,
	"user_id" text NOT NULL,
	"filename" text NOT NULL,
	"content_type" text NOT NULL,
	"size" integer NOT NULL,
	"content" "bytea" NOT NULL,
	"created_at" bigint NOT NULL,
	"expires_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "suppressions" (
	"id" text PRIMARY KEY NOT NULL,
	"user_id" text NOT NULL,
	"email" text NOT NULL,
	"reason" text NOT NULL,
	"message_id" text,
	"detail" text,
	"created_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "templates" (
	"id" text PRIMARY KEY NOT NULL,
	"user_id" text NOT NULL,
	"name" text NOT NULL,
	"subject" text,
	"html" text,
	"text" text,
	"created_at" bigint NOT NULL,
	"updated_at" bigint NOT NULL
);
--> statement-breakpoint
ALTER TABLE "messages" ADD COLUMN "in_reply_to" text;--> statement-breakpoint
ALTER TABLE "messages" ADD COLUMN "track_opens" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "messages" ADD COLUMN "track_clicks" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "messages" ADD COLUMN "attachments" jsonb;--> statement-breakpoint
ALTER TABLE "messages" ADD COLUMN "scheduled_send_id" text;--> statement-breakpoint
ALTER TABLE "messages" ADD COLUMN "bounce_type" text;--> statement-breakpoint
ALTER TABLE "messages" ADD COLUMN "next_attempt_at" bigint;--> statement-breakpoint
CREATE INDEX "events_user_created_idx" ON "events" USING btree ("user_id","created_at");--> statement-breakpoint
CREATE INDEX "events_message_idx" ON "events" USING btree ("message_id");--> statement-breakpoint
CREATE INDEX "scheduled_sends_user_idx" ON "scheduled_sends" USING btree ("user_id","scheduled_at");--> statement-breakpoint
CREATE INDEX "stored_files_expires_idx" ON "stored_files" USING btree ("expires_at");--> statement-breakpoint
CREATE UNIQUE INDEX "suppressions_user_email_uq" ON "suppressions" USING btree ("user_id","email");--> statement-breakpoint
CREATE INDEX "templates_user_idx" ON "templates" USING btree ("user_id","created_at");