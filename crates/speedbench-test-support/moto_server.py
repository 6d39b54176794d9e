"""A moto S3 server on 127.0.0.1 for speedbench's object-storage tests.

Prints one tab-separated line (endpoint, region, an access key with its
secret, the bucket made for the test) and serves until its standard input closes. Requests are
authenticated: moto checks every signature against the IAM user made here,
so a wrong secret is refused as real S3 refuses it.
"""
import json
import logging
import os
import sys

# The first three requests (the IAM set-up below) need no signature; every
# one after must be signed with the key they create.
os.environ["INITIAL_NO_AUTH_ACTION_COUNT"] = "3"

import boto3  # noqa: E402
from moto.server import ThreadedMotoServer  # noqa: E402

# Quiet: the test reads only the JSON line.
logging.getLogger("werkzeug").setLevel(logging.ERROR)
server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
server.start()
host, port = server.get_host_and_port()
endpoint = f"http://{host}:{port}"
region = "us-east-1"
iam = boto3.client(
    "iam",
    endpoint_url=endpoint,
    region_name=region,
    aws_access_key_id="bootstrap",
    aws_secret_access_key="bootstrap",
)
iam.create_user(UserName="speedbench")
key = iam.create_access_key(UserName="speedbench")["AccessKey"]
iam.put_user_policy(
    UserName="speedbench",
    PolicyName="all",
    PolicyDocument=json.dumps(
        {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
    ),
)
bucket = sys.argv[1] if len(sys.argv) > 1 else "speedbench-runs"
s3 = boto3.client(
    "s3",
    endpoint_url=endpoint,
    region_name=region,
    aws_access_key_id=key["AccessKeyId"],
    aws_secret_access_key=key["SecretAccessKey"],
)
s3.create_bucket(Bucket=bucket)
# One line, tab-separated: endpoint, region, key id, secret, bucket.
print(
    "\t".join([endpoint, region, key["AccessKeyId"], key["SecretAccessKey"], bucket]),
    flush=True,
)
sys.stdin.read()
server.stop()
