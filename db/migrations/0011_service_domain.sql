CREATE TABLE "service_domains" (
	"domain" text PRIMARY KEY NOT NULL,
	"dkim_selector" text NOT NULL,
	"dkim_public_key" text NOT NULL,
	"dkim_private_key_sealed" text NOT NULL,
	"created_at" bigint NOT NULL
);
