"""[store/blobs] File contents: the BlobStore seam, the database's table, an object store.

`store.py` the seam and the database's `blobs` table, `objects.py` contents
in an S3-compatible object store, `s3.py` the bucket through boto3.
"""
