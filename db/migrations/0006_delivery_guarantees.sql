ALTER TABLE "messages" ADD COLUMN "recipients" jsonb;--> statement-breakpoint
ALTER TABLE "messages" ADD COLUMN "trail" jsonb;--> statement-breakpoint
ALTER TABLE "events" ADD COLUMN "claimed_at" bigint;--> statement-breakpoint
ALTER TABLE "scheduled_sends" ADD COLUMN "started" boolean DEFAULT false NOT NULL;