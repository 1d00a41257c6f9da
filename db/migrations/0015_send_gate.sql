CREATE TABLE "contact_import_rows" (
	"import_id" text NOT NULL,
	"seq" integer NOT NULL,
	"email" text,
	"name" text,
	"attributes" jsonb,
	"rejection" text,
	CONSTRAINT "contact_import_rows_import_id_seq_pk" PRIMARY KEY("import_id","seq")
);
--> statement-breakpoint
ALTER TABLE "users" ADD COLUMN "suspended_at" bigint;--> statement-breakpoint
ALTER TABLE "contact_imports" ADD COLUMN "rows_total" integer;