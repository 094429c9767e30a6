"""Result projection: a validated output becomes business rows and AiJobArtifact rows."""
