CREATE TABLE "app_events" (
	"id" text PRIMARY KEY NOT NULL,
	"user_id" text NOT NULL,
	"name" text NOT NULL,
	"email" text NOT NULL,
	"contact_id" text,
	"payload" jsonb,
	"dedupe_key" text,
	"created_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "sequence_enrolments" (
	"id" text PRIMARY KEY NOT NULL,
	"user_id" text NOT NULL,
	"sequence_id" text NOT NULL,
	"version" integer NOT NULL,
	"contact_id" text NOT NULL,
	"email" text NOT NULL,
	"workflow_id" text NOT NULL,
	"run_id" text,
	"status" text NOT NULL,
	"current_step" integer,
	"waiting_for" text,
	"waits_for" jsonb DEFAULT '[]'::jsonb NOT NULL,
	"steps" jsonb DEFAULT '[]'::jsonb NOT NULL,
	"trigger" jsonb NOT NULL,
	"input" jsonb NOT NULL,
	"exit_reason" text,
	"created_at" bigint NOT NULL,
	"updated_at" bigint NOT NULL,
	"ended_at" bigint
);
--> statement-breakpoint
CREATE TABLE "sequence_outbox" (
	"id" text PRIMARY KEY NOT NULL,
	"user_id" text NOT NULL,
	"kind" text NOT NULL,
	"data" jsonb NOT NULL,
	"created_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "sequence_versions" (
	"sequence_id" text NOT NULL,
	"version" integer NOT NULL,
	"definition" jsonb NOT NULL,
	"waits_for" jsonb DEFAULT '[]'::jsonb NOT NULL,
	"created_at" bigint NOT NULL,
	CONSTRAINT "sequence_versions_sequence_id_version_pk" PRIMARY KEY("sequence_id","version")
);
--> statement-breakpoint
CREATE TABLE "sequences" (
	"id" text PRIMARY KEY NOT NULL,
	"user_id" text NOT NULL,
	"name" text NOT NULL,
	"status" text NOT NULL,
	"version" integer NOT NULL,
	"trigger_event" text,
	"created_at" bigint NOT NULL,
	"updated_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE INDEX "app_events_user_created_idx" ON "app_events" USING btree ("user_id","created_at");--> statement-breakpoint
CREATE INDEX "app_events_user_name_idx" ON "app_events" USING btree ("user_id","name","created_at");--> statement-breakpoint
CREATE INDEX "app_events_contact_idx" ON "app_events" USING btree ("contact_id","name","created_at");--> statement-breakpoint
CREATE UNIQUE INDEX "app_events_dedupe_uq" ON "app_events" USING btree ("user_id","dedupe_key") WHERE dedupe_key is not null;--> statement-breakpoint
CREATE INDEX "sequence_enrolments_seq_idx" ON "sequence_enrolments" USING btree ("sequence_id","created_at");--> statement-breakpoint
CREATE INDEX "sequence_enrolments_contact_idx" ON "sequence_enrolments" USING btree ("contact_id") WHERE status = 'running';--> statement-breakpoint
CREATE INDEX "sequence_enrolments_user_email_idx" ON "sequence_enrolments" USING btree ("user_id","email") WHERE status = 'running';--> statement-breakpoint
CREATE INDEX "sequence_outbox_created_idx" ON "sequence_outbox" USING btree ("created_at");--> statement-breakpoint
CREATE UNIQUE INDEX "sequences_user_name_uq" ON "sequences" USING btree ("user_id","name");--> statement-breakpoint
CREATE INDEX "sequences_user_trigger_idx" ON "sequences" USING btree ("user_id","trigger_event");