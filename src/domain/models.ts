/** Domain records: what the rest of the code sees of rows (booleans as booleans, tags parsed). */

export interface Location {
  id: string;
  name: string;
  uri: string;
  isDefault: boolean;
  created: number;
  updated: number;
}

export interface Bucket {
  id: string;
  defaultLocation: string;
  defaultStorageClass: string;
  size: number;
  reservedSize: number;
  quotaSize: number | null;
  maxFileSize: number | null;
  /** The bucket's S3 name, or null (its id addresses it too). */
  name?: string | null;
  /** Anyone may download its objects without a credential (not list them). */
  publicRead?: boolean;
  /** Copies of each file required (replication policy); null: FILES_REST_DEFAULT_COPIES. */
  copies?: number | null;
  /**
   * The region a client named when creating it through the S3 door (S3's LocationConstraint), or null:
   * stored and answered (GetBucketLocation), nothing more; files-rest has no regions.
   */
  region?: string | null;
  locked: boolean;
  deleted: boolean;
  created: number;
  updated: number;
}

export interface FileInstance {
  id: string;
  locationId: string | null;
  uri: string | null;
  storageClass: string;
  size: number;
  checksum: string | null;
  readable: boolean;
  writable: boolean;
  lastCheckAt: number | null;
  lastCheck: boolean | null;
  created: number;
  updated: number;
}

export interface ObjectVersion {
  versionId: string;
  bucketId: string;
  key: string;
  fileId: string | null;
  mimetype: string | null;
  isHead: boolean;
  tags: Record<string, string>;
  created: number;
  updated: number;
  seq: number;
  /** The file instance, when the version has one (absent for delete markers). */
  file: FileInstance | null;
}

/**
 * What a listing page shows of a version: the version and its file's size, checksum and last
 * integrity check. Listings select only these columns (a page of 1000 full rows cost SQLite three
 * times as much).
 */
export interface ListedVersion extends Omit<ObjectVersion, 'file'> {
  file: Pick<FileInstance, 'size' | 'checksum' | 'lastCheckAt' | 'lastCheck'> | null;
}

export function isDeleteMarker(v: ObjectVersion): boolean {
  return v.fileId === null;
}
