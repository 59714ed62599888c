/**
 * The S3 operation a request asks for, by AWS's names (`PutObject`, `ListObjectsV2`, …), for the
 * metrics' `operation` label: a small fixed set, never a bucket or a key. What the door does not
 * offer is `Unsupported`, what it cannot parse `Unknown`.
 */
export function s3OperationName(method: string, bucketName: string, key: string, query: URLSearchParams, unsupported: ReadonlySet<string>): string {
  for (const name of query.keys()) if (unsupported.has(name)) return 'Unsupported';
  if (method === 'OPTIONS') return 'PreflightRequest';
  if (bucketName === '') return method === 'GET' ? 'ListBuckets' : 'Unknown';
  if (key === '') {
    if (query.has('acl')) return method === 'GET' ? 'GetBucketAcl' : method === 'PUT' ? 'PutBucketAcl' : 'Unknown';
    if (query.has('cors')) return method === 'GET' ? 'GetBucketCors' : method === 'PUT' ? 'PutBucketCors' : method === 'DELETE' ? 'DeleteBucketCors' : 'Unknown';
    if (query.has('tagging')) return method === 'GET' ? 'GetBucketTagging' : method === 'PUT' ? 'PutBucketTagging' : method === 'DELETE' ? 'DeleteBucketTagging' : 'Unknown';
    switch (method) {
      case 'PUT':
        return query.has('versioning') ? 'PutBucketVersioning' : 'CreateBucket';
      case 'HEAD':
        return 'HeadBucket';
      case 'DELETE':
        return 'DeleteBucket';
      case 'POST':
        return query.has('delete') ? 'DeleteObjects' : 'PostObject';
      case 'GET':
        if (query.has('location')) return 'GetBucketLocation';
        if (query.has('versioning')) return 'GetBucketVersioning';
        if (query.has('versions')) return 'ListObjectVersions';
        return query.get('list-type') === '2' ? 'ListObjectsV2' : 'ListObjects';
      default:
        return 'Unknown';
    }
  }
  if (query.has('acl')) return method === 'GET' ? 'GetObjectAcl' : method === 'PUT' ? 'PutObjectAcl' : 'Unknown';
  if (query.has('restore')) return method === 'POST' ? 'RestoreObject' : 'Unknown';
  if (query.has('tagging')) return method === 'GET' ? 'GetObjectTagging' : method === 'PUT' ? 'PutObjectTagging' : method === 'DELETE' ? 'DeleteObjectTagging' : 'Unknown';
  switch (method) {
    case 'PUT':
      return 'PutObject';
    case 'GET':
      return query.has('attributes') ? 'GetObjectAttributes' : 'GetObject';
    case 'HEAD':
      return 'HeadObject';
    case 'DELETE':
      return 'DeleteObject';
    default:
      return 'Unknown';
  }
}
