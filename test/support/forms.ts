// ng-file-upload's multipart/form-data bodies, for the tests that cut them short.

export const FORM = 'multipart/form-data; boundary=XyZ';
export const field = (name: string, value: string) => `--XyZ\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`;
export const filePart = (content: string) => `--XyZ\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\nContent-Type: text/plain\r\n\r\n${content}\r\n`;
/** ng-file-upload's forms; the closing delimiter comes last. */
export const FORMS = {
  'PUT with _totalSize': (bucket: string) => ({ path: `/files/${bucket}/form.txt`, body: field('_totalSize', '5') + filePart('hello') }),
  'PUT without _totalSize': (bucket: string) => ({ path: `/files/${bucket}/form.txt`, body: filePart('hello') }),
  'part ?uploadId=': (bucket: string, uploadId: string) => ({
    path: `/files/${bucket}/mp.bin?uploadId=${uploadId}`,
    body: field('_chunkNumber', '0') + field('_currentChunkSize', '5') + filePart('hello'),
  }),
};
