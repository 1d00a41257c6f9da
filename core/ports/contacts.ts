/** What the import workflow answers to `importProgressQuery`. */
export type ImportProgress = {
  status: 'running' | 'done' | 'failed';
  rowsRead: number;
  created: number;
  updated: number;
  rejected: number;
  rejections: { row: number; reason: string }[];
};

/** The CSV import workflow of a contact import. */
export type ImportWorkflows = {
  /** Starts the CSV import workflow of one import (starting twice is success). */
  startContactImport(i: { importId: string; userId: string }): Promise<void>;
  /** The running import's `importProgressQuery` answer (short timeout); undefined when it cannot answer. */
  contactImportProgress(importId: string): Promise<ImportProgress | undefined>;
};
