"""The job API's core: create, read and cancel jobs on behalf of a user."""
