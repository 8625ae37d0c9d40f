"""The audited commands that change the durable store: users and jobs, groups, storage nodes,
and the groups kept in step with the site's Unix groups."""
