CREATE TABLE "cap_leases" (
	"id" text PRIMARY KEY NOT NULL,
	"user_id" text NOT NULL,
	"day" text NOT NULL,
	"month" text NOT NULL,
	"holder" text NOT NULL,
	"amount" integer NOT NULL,
	"expires_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE INDEX "cap_leases_user_idx" ON "cap_leases" USING btree ("user_id");