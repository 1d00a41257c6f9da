ALTER TABLE "service_domains" ADD COLUMN "dkim_next_selector" text;--> statement-breakpoint
ALTER TABLE "service_domains" ADD COLUMN "dkim_next_public_key" text;--> statement-breakpoint
ALTER TABLE "service_domains" ADD COLUMN "dkim_next_private_key_sealed" text;--> statement-breakpoint
ALTER TABLE "service_domains" ADD COLUMN "dkim_prev_selector" text;--> statement-breakpoint
ALTER TABLE "service_domains" ADD COLUMN "dkim_prev_public_key" text;--> statement-breakpoint
ALTER TABLE "service_domains" ADD COLUMN "dkim_rotated_at" bigint;