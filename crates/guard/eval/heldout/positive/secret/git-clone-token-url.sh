git clone https://oauth2:glpat-{{rand:alnum:20}}@gitlab.com/acme/infra.git
